package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is a process as /proc shows it.
type Proc struct {
	Pid   int
	State string   // "R", "S", "Z" (dead, not yet reaped), ...
	Argv  []string // its command line
}

// statFields is /proc/PID/stat from its third field (the state) on: the
// command name before it may hold spaces and parentheses, never the last ')'.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// State is pid's state letter ("Z": dead and not yet reaped), "" when there
// is no such process.
func State(pid int) string {
	if f := statFields(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// Children lists the processes whose parent is ppid, zombies included.
func Children(ppid int) []Proc {
	var out []Proc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		f := statFields(pid)
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		cl, _ := os.ReadFile(d + "/cmdline")
		out = append(out, Proc{Pid: pid, State: f[0], Argv: strings.Split(strings.TrimSuffix(string(cl), "\x00"), "\x00")})
	}
	return out
}
