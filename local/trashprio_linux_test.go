package local

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// reportLowered is the child of TestRemoverRunsLowered: it lowers its
// priority as the remover does, starts more threads, and prints each
// thread's nice and its process group's I/O class.
func reportLowered() int {
	lowerPriority()
	done := make(chan struct{})
	for range 4 {
		go func() { <-done }() // goroutines that may need threads of their own
	}
	var out []string
	tasks, _ := filepath.Glob("/proc/self/task/*/stat")
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		out = append(out, "nice="+f[16]) // field 19
	}
	prio, _, _ := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoPgrp, 0, 0)
	fmt.Printf("%s class=%d\n", strings.Join(out, " "), prio>>ioprioClassShift)
	close(done)
	return 0
}

// TestRemoverRunsLowered: the released workspace's remover runs every
// thread at nice 19 in the idle I/O class, so that the next session's
// placing of its tree (which it used to slow on the same disk) and the
// user's commands go first.
func TestRemoverRunsLowered(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "SBX_TEST_LOWER_PRIORITY=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own group, as the remover's
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := strings.Fields(strings.TrimSpace(string(out)))
	if len(got) < 2 || got[len(got)-1] != "class=3" {
		t.Fatalf("the remover's I/O class: %q, want idle (3)", out)
	}
	for _, f := range got[:len(got)-1] {
		if f != "nice=19" {
			t.Fatalf("a remover thread runs at %s, want nice=19: %q", f, out)
		}
	}
}
