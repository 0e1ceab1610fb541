package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"codexgate/proc"
)

// children are the worker processes this package started and will Wait for
// itself; the reaper leaves them alone.
var children = struct {
	sync.Mutex // protects pids; held across Start so a new child is known before it can exit
	pids       map[int]bool
}{pids: make(map[int]bool)}

const prSetChildSubreaper = 36

// AdoptOrphans makes codexgate the subreaper of its descendants. A process a
// worker leaves behind (double-forked, daemonised) is then re-parented to
// codexgate rather than to init, so it stays a descendant that the control
// socket refuses; the orphans are reaped here until ctx ends.
func AdoptOrphans(ctx context.Context, log *slog.Logger) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("become child subreaper: %w", errno)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(sigs)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sigs:
				reapOrphans(log)
			}
		}
	}()
	return nil
}

// reapOrphans waits for the zombie children that are adopted orphans: not a
// worker leader, and not in codexgate's own process group (children other
// code started with os/exec are, and their owners wait for them).
func reapOrphans(log *slog.Logger) {
	self, group := os.Getpid(), syscall.Getpgrp()
	children.Lock()
	defer children.Unlock()
	proc.Each(func(pid int, st proc.Stat) bool {
		if children.pids[pid] || st.Parent != self || st.State != "Z" || st.Group == group {
			return true
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil {
			log.Debug("reaped an orphan of a worker", "pid", pid)
		}
		return true
	})
}
