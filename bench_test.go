package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/supervisor/codextest"
)

// idleWindow is how long the idle process is measured, after idleSettle.
const (
	idleSettle = 10 * time.Second
	idleWindow = 30 * time.Second
)

// BenchmarkIdleDesktop reports, for the app with three idle workers (their
// codex children excluded), its resident memory, CPU and wakeups a second
// over 30 idle seconds after a 10 s settle, beside the same app run headless
// in the same benchmark. It needs the desktop session of `make bench`.
// Aims for the desktop: RSS ≤ 16 MiB, CPU ≤ 0.05 %, ≤ 1 wakeup a second.
func BenchmarkIdleDesktop(b *testing.B) {
	desktop := measureIdle(b, true)
	headless := measureIdle(b, false)
	b.ReportMetric(desktop.rssMiB, "MiB-rss")
	b.ReportMetric(desktop.cpuPercent, "%cpu-idle")
	b.ReportMetric(desktop.wakeups, "wakeups/s")
	b.ReportMetric(headless.rssMiB, "MiB-rss-headless")
	b.ReportMetric(headless.cpuPercent, "%cpu-idle-headless")
	b.ReportMetric(headless.wakeups, "wakeups/s-headless")
}

type idle struct{ rssMiB, cpuPercent, wakeups float64 }

func measureIdle(b *testing.B, desktop bool) idle {
	a := newApp(b)
	a.desktop = desktop
	a.start(
		workerDef{name: "one", steps: []codextest.Step{codextest.Say("idle")}},
		workerDef{name: "two", steps: []codextest.Step{codextest.Say("idle")}},
		workerDef{name: "three", steps: []codextest.Step{codextest.Say("idle")}},
	)
	pid := a.cmd.Process.Pid
	time.Sleep(idleSettle) // let start-up work (tray, hotkeys) finish
	ticks, switches := cpuTicks(b, pid), contextSwitches(b, pid)
	time.Sleep(idleWindow)
	m := idle{
		rssMiB:     rssMiB(b, pid),
		cpuPercent: float64(cpuTicks(b, pid)-ticks) / 100 / idleWindow.Seconds() * 100,
		wakeups:    float64(contextSwitches(b, pid)-switches) / idleWindow.Seconds(),
	}
	a.stop()
	return m
}

// cpuTicks is utime+stime of pid, in clock ticks (100 a second on Linux).
func cpuTicks(b *testing.B, pid int) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+1:])
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return utime + stime
}

// contextSwitches sums the voluntary and involuntary context switches of
// every thread of pid: each is a wakeup.
func contextSwitches(b *testing.B, pid int) int {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("threads of %d: %v", pid, err)
	}
	n := 0
	for _, task := range tasks {
		n += statusField(task, "voluntary_ctxt_switches:") + statusField(task, "nonvoluntary_ctxt_switches:")
	}
	return n
}

func statusField(path, name string) int {
	raw, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

func rssMiB(b *testing.B, pid int) float64 {
	kb := statusField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS:")
	if kb == 0 {
		b.Fatal("no VmRSS")
	}
	return float64(kb) / 1024
}

// BenchmarkPanelFirstFrame reports the time from a click on the tray's
// "Open panel" (its D-Bus menu Event) to the panel process painting its
// first frame, the median of ten opens, each closed again (Ctrl+W). Aim
// under Xvfb: ≤ 300 ms.
func BenchmarkPanelFirstFrame(b *testing.B) {
	needDesktop(b)
	a := newApp(b)
	a.desktop = true
	a.start(workerDef{name: "one", steps: []codextest.Step{codextest.Say("idle")}})
	menu := a.trayMenu()
	var times []time.Duration
	for i := 1; i <= 10; i++ {
		start := time.Now()
		menu.click("Open panel")
		for len(panelShownLine.FindAllString(a.log.String(), -1)) < i {
			time.Sleep(2 * time.Millisecond)
		}
		times = append(times, time.Since(start))
		pid := a.panelShown(i)
		xdotool(b, "windowfocus", "--sync", panelWindow(b, pid))
		xdotool(b, "key", "ctrl+w")
		a.waitFor("the panel to close", func() bool { return strings.Count(a.log.String(), `msg="panel closed"`) == i })
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "ms-first-frame-median")
	b.ReportMetric(float64(times[len(times)-1].Milliseconds()), "ms-first-frame-max")
}

var notifyTime = regexp.MustCompile(`method call time=(\d+)\.(\d+) .*member=Notify`)

// BenchmarkCardToNotify reports the time from a card's creation to its
// Notify call on the session bus, over twenty cards answered one after the
// other (allowed, slower than the burst limit, which holds notifications back on
// purpose). Aim: p99 ≤ 50 ms.
func BenchmarkCardToNotify(b *testing.B) {
	needDesktop(b)
	const cards = 20
	notes := notifications(b)
	var steps []codextest.Step
	for i := range cards {
		steps = append(steps, codextest.Exec(fmt.Sprintf("touch f%d", i), true))
	}
	a := newApp(b)
	a.desktop = true
	a.start(workerDef{name: "one", steps: steps})
	a.must("task", "one", "touch the files")
	var lat []time.Duration
	for i := 1; i <= cards; i++ {
		c := a.cards(1)[0]
		var m [][]string
		a.waitFor("the notification", func() bool {
			m = notifyTime.FindAllStringSubmatch(notes.String(), -1)
			return len(m) >= i
		})
		sec, _ := strconv.ParseInt(m[i-1][1], 10, 64)
		usec, _ := strconv.ParseInt(m[i-1][2], 10, 64)
		lat = append(lat, time.Unix(sec, usec*1000).Sub(c.CreatedAt))
		time.Sleep(400 * time.Millisecond) // under notify.BurstSize a second
		a.show(c)
		a.must("answer", "allow", c.ID)
		a.waitFor("the card to close", func() bool {
			var open []approvals.Card
			return a.try(&open, "cards", "--json") == nil && (len(open) == 0 || open[0].ID != c.ID)
		})
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-notify-median")
	b.ReportMetric(float64(lat[(len(lat)*99-1)/100].Microseconds())/1000, "ms-notify-p99")
}
