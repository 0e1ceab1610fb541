package supervisor

import (
	"errors"
	"sync"
)

// secretCache reads each keyring secret once, until forget: the keyring is
// asked again after a config change or a login, not at every worker start.
// A keyring lookup can block for seconds, so it runs outside mu.
type secretCache struct {
	read func(name string) (string, error)

	mu      sync.Mutex // protects entries
	entries map[string]*secretEntry
}

type secretEntry struct {
	once  sync.Once
	value string
	err   error
}

func newSecretCache(read func(string) (string, error)) *secretCache {
	return &secretCache{read: read, entries: make(map[string]*secretEntry)}
}

func (c *secretCache) get(name string) (string, error) {
	if c.read == nil {
		return "", errors.New("no keyring is available")
	}
	c.mu.Lock()
	e := c.entries[name]
	if e == nil {
		e = &secretEntry{}
		c.entries[name] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.value, e.err = c.read(name) })
	return e.value, e.err
}

func (c *secretCache) forget() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}
