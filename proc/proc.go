// Package proc reads process relations from /proc.
package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is the part of /proc/PID/stat codexgate uses.
type Stat struct {
	State  string // R, S, Z, ...
	Parent int
	Group  int
}

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, fmt.Errorf("read process status: %w", err)
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return Stat{}, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 {
		return Stat{}, errors.New("malformed /proc stat")
	}
	parent, err1 := strconv.Atoi(f[1])
	group, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return Stat{}, errors.New("malformed /proc stat")
	}
	return Stat{State: f[0], Parent: parent, Group: group}, nil
}

// Each calls f for every process that can be read now, until f returns false.
func Each(f func(pid int, st Stat) bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil && !f(pid, st) {
			return
		}
	}
}

// Ancestors is pid and its parents, up to but not including pid 1.
func Ancestors(pid int) ([]int, error) {
	var chain []int
	for pid > 1 && len(chain) < 4096 {
		chain = append(chain, pid)
		st, err := ReadStat(pid)
		if err != nil {
			return nil, err
		}
		pid = st.Parent
	}
	return chain, nil
}
