package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"codexgate/approvals"
	"codexgate/supervisor/codextest"
)

// artifacts is where the desktop test leaves its screenshot.
var artifacts = filepath.Join(codextest.Root(), ".tools", "artifacts")

func needDesktop(t testing.TB) {
	if os.Getenv("DISPLAY") == "" || os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		t.Fatal("no desktop session: run the tests with `make test`, which starts one")
	}
}

// notifications records the Notify calls on the session bus.
func notifications(t testing.TB) *syncBuffer {
	monitor := exec.Command("dbus-monitor", "--session", "type='method_call',interface='org.freedesktop.Notifications',member='Notify'")
	notes := &syncBuffer{}
	monitor.Stdout = notes
	if err := monitor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { monitor.Process.Kill(); monitor.Wait() })
	return notes
}

// TestDesktop runs the app as a person does, under the private desktop
// session of `make test` (Xvfb, D-Bus, dunst, a tray): a registered tray
// item, one notification per card, the panel opened from the tray menu and
// showing the card, an answer given there, and the panel process gone once
// its window is closed.
func TestDesktop(t *testing.T) {
	needDesktop(t)
	notes := notifications(t)
	a := newApp(t)
	a.desktop = true
	a.extra = "[cards]\nsettle_delay = \"1s\"\n"
	ws := a.start(workerDef{name: "desk", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}})
	menu := a.trayMenu()

	a.must("task", "desk", "delete a.txt")
	card := a.cards(1)[0]
	a.waitFor("the notification", func() bool { return strings.Count(notes.String(), "member=Notify") >= 1 })
	if calls := strings.Count(notes.String(), "member=Notify"); calls != 1 {
		t.Errorf("%d Notify calls for one card:\n%s", calls, notes)
	}
	if !strings.Contains(notes.String(), "desk wants to run a command") || !strings.Contains(notes.String(), "rm a.txt") {
		t.Errorf("the notification does not show the command:\n%s", notes)
	}
	a.waitFor("the card in the tray menu", func() bool { return menu.item("desk · command: ") != 0 })

	menu.click("Open panel")
	pid := a.panelShown(1)
	win := panelWindow(t, pid)
	// Alt+A is the panel's Allow: held back for the settle delay, then sent.
	time.Sleep(1500 * time.Millisecond)
	shot := filepath.Join(artifacts, "desktop-panel.png")
	os.MkdirAll(artifacts, 0o755)
	if out, err := exec.Command("import", "-window", "root", shot).CombinedOutput(); err != nil {
		t.Errorf("screenshot: %v %s", err, out)
	} else {
		t.Logf("screenshot of the panel: %s", shot)
	}

	// Under load the panel may paint late, and its Allow wakes the settle
	// delay after that: press again until the card is answered.
	a.waitFor("the allow in the panel", func() bool {
		xdotool(t, "windowfocus", "--sync", win)
		xdotool(t, "key", "alt+a")
		var open []approvals.Card
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if a.try(&open, "cards", "--json") == nil && len(open) == 0 {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	})
	a.idle("desk")
	if exists(filepath.Join(ws["desk"], "a.txt")) {
		t.Error("the allow in the panel did not remove a.txt")
	}
	audit, _ := os.ReadFile(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if !strings.Contains(string(audit), `"by":"panel"`) || !strings.Contains(string(audit), card.ID) {
		t.Errorf("the audit log does not record the panel's answer to %s:\n%s", card.ID, audit)
	}

	xdotool(t, "windowfocus", "--sync", win)
	xdotool(t, "key", "ctrl+w")
	a.waitFor("the panel to close", func() bool { return strings.Contains(a.log.String(), "panel closed") })
	a.waitFor("the panel process to end", func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestDesktopWithoutThePanel: with no panel program beside codexgate, the
// tray and a notification say so, and a card is still answered from the
// command line.
func TestDesktopWithoutThePanel(t *testing.T) {
	needDesktop(t)
	notes := notifications(t)
	a := newApp(t)
	a.desktop = true
	a.exe = filepath.Join(codextest.TempDir(t), "codexgate")
	copyFile(t, binary, a.exe)
	ws := a.start(workerDef{name: "alone", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}})
	menu := a.trayMenu()

	if out, err := a.run("panel"); err == nil || !strings.Contains(out, "panel program is missing") {
		t.Errorf("codexgate panel without the panel: %v %q", err, out)
	}
	a.waitFor("the tray to say the panel is missing", func() bool { return menu.item("Panel unavailable: ") != 0 })
	a.waitFor("the notification", func() bool { return strings.Contains(notes.String(), "panel cannot open") })

	a.must("task", "alone", "delete a.txt")
	c := a.cards(1)[0]
	a.show(c)
	a.must("answer", "allow", c.ID)
	a.idle("alone")
	if exists(filepath.Join(ws["alone"], "a.txt")) {
		t.Error("the allow from the command line did not remove a.txt")
	}
}

// TestTheAppLinksNoFyneNorOpenGL: the long-lived process and the client
// commands are one binary without Fyne, so they neither tick at 60 Hz nor
// need libGL or an X display to start.
func TestTheAppLinksNoFyneNorOpenGL(t *testing.T) {
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(deps)) {
		if strings.HasPrefix(pkg, "fyne.io/fyne") || strings.Contains(pkg, "go-gl") {
			t.Errorf("codexgate links %s", pkg)
		}
	}
	libs, err := exec.Command("ldd", binary).CombinedOutput()
	if err != nil && !bytes.Contains(libs, []byte("not a dynamic executable")) {
		t.Fatalf("ldd: %v %s", err, libs)
	}
	for _, lib := range []string{"libGL", "libX11", "libEGL"} {
		if bytes.Contains(libs, []byte(lib)) {
			t.Errorf("codexgate needs %s:\n%s", lib, libs)
		}
	}
}

// TestClientCommandsAreQuietInTheCLocale: `codexgate cards` prints its
// answer and nothing on stderr when the locale is C.UTF-8.
func TestClientCommandsAreQuietInTheCLocale(t *testing.T) {
	a, _ := startApp(t, workerDef{name: "quiet"})
	cmd := exec.Command(binary, "--socket", a.socket, "cards")
	cmd.Env = append(a.env, "LANG=C.UTF-8", "LC_ALL=", "LC_MESSAGES=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "no open cards" || stderr.Len() != 0 {
		t.Errorf("codexgate cards: %v, stdout %q, stderr %q", err, out, stderr.String())
	}
}

func copyFile(t testing.TB, from, to string) {
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, raw, 0o755); err != nil {
		t.Fatal(err)
	}
}

func xdotool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("xdotool", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("xdotool %s: %v %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// panelWindow is the X window of the panel process pid.
func panelWindow(t testing.TB, pid int) string {
	ids := strings.Fields(xdotool(t, "search", "--sync", "--onlyvisible", "--pid", strconv.Itoa(pid), "--name", "^Codexgate$"))
	return ids[0]
}

var panelShownLine = regexp.MustCompile(`msg="panel shown" pid=(\d+) first_frame_ms=(\d+)`)

// panelShown waits for the n-th panel of the run to paint its first frame
// and returns its pid.
func (a *testApp) panelShown(n int) int {
	a.t.Helper()
	var m [][]string
	a.waitFor(fmt.Sprintf("panel %d to show", n), func() bool {
		m = panelShownLine.FindAllStringSubmatch(a.log.String(), -1)
		return len(m) >= n
	})
	pid, _ := strconv.Atoi(m[n-1][1])
	return pid
}

// trayMenu is the D-Bus menu of the app's tray item, once it is registered.
type trayMenu struct {
	t    testing.TB
	menu dbus.BusObject
}

func (a *testApp) trayMenu() *trayMenu {
	a.t.Helper()
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { conn.Close() })
	var m *trayMenu
	a.waitFor("the tray item to register", func() bool {
		v, err := conn.Object("org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher").GetProperty("org.kde.StatusNotifierWatcher.RegisteredStatusNotifierItems")
		if err != nil {
			return false
		}
		items, _ := v.Value().([]string)
		for _, it := range items {
			// The watcher lists a bus name, with the item's path when it
			// is not the default one.
			name, path, ok := strings.Cut(it, "/")
			if !ok {
				path = "StatusNotifierItem"
			}
			var pid uint32
			if conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, name).Store(&pid) != nil || int(pid) != a.cmd.Process.Pid {
				continue
			}
			menuPath, err := conn.Object(name, dbus.ObjectPath("/"+path)).GetProperty("org.kde.StatusNotifierItem.Menu")
			if err != nil {
				return false
			}
			m = &trayMenu{t: a.t, menu: conn.Object(name, menuPath.Value().(dbus.ObjectPath))}
			return true
		}
		return false
	})
	return m
}

// item is the id of the first item whose label starts with prefix; 0 when
// there is none.
func (m *trayMenu) item(prefix string) int32 {
	var rev uint32
	var layout []any
	if err := m.menu.Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{}).Store(&rev, &layout); err != nil {
		m.t.Logf("menu layout: %v", err)
		return 0
	}
	return findItem(layout, prefix)
}

// findItem walks a dbusmenu layout (id, properties, children).
func findItem(node []any, prefix string) int32 {
	if len(node) != 3 {
		return 0
	}
	if props, ok := node[1].(map[string]dbus.Variant); ok {
		if label, ok := props["label"].Value().(string); ok && strings.HasPrefix(label, prefix) {
			return node[0].(int32)
		}
	}
	children, _ := node[2].([]dbus.Variant)
	for _, c := range children {
		child, _ := c.Value().([]any)
		if id := findItem(child, prefix); id != 0 {
			return id
		}
	}
	return 0
}

// click sends the menu a click on the item labelled label, as a tray host
// does.
func (m *trayMenu) click(label string) {
	m.t.Helper()
	id := m.item(label)
	if id == 0 {
		m.t.Fatalf("no %q in the tray menu", label)
	}
	if err := m.menu.Call("com.canonical.dbusmenu.Event", 0, id, "clicked", dbus.MakeVariant(int32(0)), uint32(time.Now().Unix())).Err; err != nil {
		m.t.Fatalf("click %q: %v", label, err)
	}
}
