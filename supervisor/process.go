package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"codexgate/proc"
)

// scrubbedEnv never reaches a worker: with them the agent could reach the
// desktop (to inject keys or read the screen), the session bus (to raise or
// answer notifications) or the approval channel itself.
var scrubbedEnv = []string{
	"DISPLAY",
	"WAYLAND_DISPLAY",
	"XAUTHORITY",
	"DBUS_SESSION_BUS_ADDRESS",
	"CODEXGATE_SOCKET",
	// The session bus and the control socket live under it by default.
	"XDG_RUNTIME_DIR",
	// Other ways into the session that start processes outside the
	// worker's tree: window managers' and compositors' command sockets,
	// the session manager, terminal multiplexers and terminals.
	"WAYLAND_SOCKET",
	"SWAYSOCK",
	"I3SOCK",
	"NIRI_SOCKET",
	"HYPRLAND_INSTANCE_SIGNATURE",
	"SESSION_MANAGER",
	"TMUX",
	"KITTY_LISTEN_ON",
}

// stderrLines is how many of a worker's last stderr lines are kept.
const stderrLines = 20

// childEnv is the parent environment without the scrubbed variables, with
// extra added (extra wins; it cannot bring a scrubbed variable back).
func childEnv(parent []string, extra map[string]string) []string {
	env := make([]string, 0, len(parent)+len(extra))
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(scrubbedEnv, name) {
			continue
		}
		if _, overridden := extra[name]; overridden {
			continue
		}
		env = append(env, kv)
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		if !slices.Contains(scrubbedEnv, name) {
			env = append(env, name+"="+extra[name])
		}
	}
	return env
}

// process is one codex child in a process group of its own.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	log    *slog.Logger

	exited  chan struct{} // closed when the group leader has been reaped
	waitErr error         // set before exited is closed

	stderrDone chan struct{}
	onStderr   func(line string)
	mu         sync.Mutex // protects tail
	tail       []string
}

// startProcess starts path in a process group of its own; onStderr is told
// each line it writes to stderr.
func startProcess(path string, args []string, dir string, env []string, onStderr func(string), log *slog.Logger) (*process, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = env
	// A group of its own, so stop and crash clean-up reach every descendant,
	// including a native codex that a Node wrapper spawned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Plain pipes rather than cmd.StdoutPipe: Wait must not close our read
	// side, and a descendant that outlives the leader keeps them open until
	// the group is killed.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	children.Lock()
	err = cmd.Start()
	if err == nil {
		children.pids[cmd.Process.Pid] = true
	}
	children.Unlock()
	closeAll(stdinR, stdoutW, stderrW)
	if err != nil {
		closeAll(stdinW, stdoutR, stderrR)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &process{
		cmd:        cmd,
		stdin:      stdinW,
		stdout:     stdoutR,
		log:        log,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		onStderr:   onStderr,
	}
	go p.wait()
	go p.readStderr(stderrR)
	return p, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) wait() {
	p.waitErr = p.cmd.Wait()
	children.Lock()
	delete(children.pids, p.cmd.Process.Pid)
	children.Unlock()
	close(p.exited)
}

func (p *process) readStderr(r io.ReadCloser) {
	defer close(p.stderrDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.log.Debug("codex stderr", "line", line)
		p.onStderr(line)
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > stderrLines {
			p.tail = p.tail[len(p.tail)-stderrLines:]
		}
		p.mu.Unlock()
	}
}

// message is what codex last said about an error: its last "Error:" line
// (how a Rust main reports the error it ends with), else its last line.
func (p *process) message() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range slices.Backward(p.tail) {
		if strings.HasPrefix(strings.TrimSpace(line), "Error:") {
			return strings.TrimSpace(line)
		}
	}
	for _, line := range slices.Backward(p.tail) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

func (p *process) signalGroup(sig syscall.Signal) {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("signal worker process group", "signal", sig, "err", err)
	}
}

// stop ends the whole group: stdin closed, TERM, and KILL after grace. It
// returns once the leader is reaped and the group's output has closed.
func (p *process) stop(grace time.Duration) {
	p.stdin.Close()
	p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
	}
	p.reap()
}

// reapTimeout bounds the wait for a killed group to be gone.
const reapTimeout = 5 * time.Second

// reap kills whatever is left of the group, then waits for the leader, for
// the group's stderr to close, and for no live member of the group to remain.
func (p *process) reap() {
	p.stdin.Close()
	p.signalGroup(syscall.SIGKILL)
	<-p.exited
	deadline := time.After(reapTimeout)
	select {
	case <-p.stderrDone:
	case <-deadline:
		p.log.Warn("a process of the worker's group still holds stderr open")
	}
	p.stdout.Close()
	for groupAlive(p.pid()) {
		select {
		case <-deadline:
			p.log.Warn("a process of the worker's group survived SIGKILL", "pgid", p.pid())
			return
		case <-time.After(10 * time.Millisecond):
			p.signalGroup(syscall.SIGKILL)
		}
	}
}

// groupAlive reports whether a process of group pgid is still running
// (zombies, which are already dead, do not count).
func groupAlive(pgid int) bool {
	alive := false
	proc.Each(func(_ int, st proc.Stat) bool {
		alive = st.Group == pgid && st.State != "Z"
		return !alive
	})
	return alive
}

// exitError describes how the leader ended, codex's own words first. The
// process has been reaped.
func (p *process) exitError() error {
	how := "codex exited"
	if p.waitErr != nil {
		how += " (" + p.waitErr.Error() + ")"
	}
	if msg := p.message(); msg != "" {
		return fmt.Errorf("%s; %s", msg, how)
	}
	return errors.New(how)
}
