package portal

import (
	"sync"
	"testing"
	"time"
)

// SetClock makes the repeat filter see a clock that moves only when the
// returned function adds to it, until the test ends. Call it before Open.
func SetClock(t testing.TB) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := clock
	clock = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	t.Cleanup(func() { clock = old })
	return func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
}
