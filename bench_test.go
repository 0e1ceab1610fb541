package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"codexgate/supervisor/codextest"
)

// idleWindow is how long the idle CPU time is measured.
const idleWindow = 30 * time.Second

// BenchmarkIdleDesktop reports the resident memory of the running app with
// three idle workers (the codex children excluded) and its CPU time over 30
// idle seconds, beside the same app run headless in the same benchmark as
// the baseline. It needs the desktop session of `make bench`. Aim: under
// 60 MiB and under 1% of a core.
func BenchmarkIdleDesktop(b *testing.B) {
	desktop := measureIdle(b, true)
	headless := measureIdle(b, false)
	b.ReportMetric(desktop.rssMiB, "MiB-rss")
	b.ReportMetric(desktop.cpuPercent, "%cpu-idle")
	b.ReportMetric(headless.rssMiB, "MiB-rss-headless")
	b.ReportMetric(headless.cpuPercent, "%cpu-idle-headless")
	b.ReportMetric(desktop.rssMiB/headless.rssMiB, "rss-x-headless")
}

type idle struct{ rssMiB, cpuPercent float64 }

func measureIdle(b *testing.B, desktop bool) idle {
	a := newApp(b)
	a.desktop = desktop
	a.start(
		workerDef{name: "one", steps: []codextest.Step{codextest.Say("idle")}},
		workerDef{name: "two", steps: []codextest.Step{codextest.Say("idle")}},
		workerDef{name: "three", steps: []codextest.Step{codextest.Say("idle")}},
	)
	pid := a.cmd.Process.Pid
	time.Sleep(10 * time.Second) // let start-up work (fonts, tray, GL) finish
	before := cpuTicks(b, pid)
	time.Sleep(idleWindow)
	after := cpuTicks(b, pid)
	m := idle{rssMiB: rssMiB(b, pid), cpuPercent: float64(after-before) / 100 / idleWindow.Seconds() * 100}
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

func rssMiB(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
