// Package testenv is what the project's tests that drive real processes
// need of their machine, in one place instead of a copy per package: build
// a binary of the project (Build), wait for an observable condition with a
// deadline instead of sleeping (WaitFor), list the host's processes by
// command line (HostProcs), and cancel a context once a command has said
// it runs (CancelOn). A locked buffer is sandboxtest.Buffer.
//
// For tests only: no binary sbx ships links it, nor sandboxtest, deptest
// or package testing (TestNotInBinaries).
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Build runs `go build -o out flags... pkg` and says why it failed with
// go's own output. pkg is an import path or a directory.
func Build(out, pkg string, flags ...string) error {
	return build(out, pkg, nil, flags)
}

// BuildStatic is Build with cgo off: a static binary, as sbx ships (a
// sandbox or a pod runs it without the host's libc).
func BuildStatic(out, pkg string, flags ...string) error {
	return build(out, pkg, []string{"CGO_ENABLED=0"}, flags)
}

func build(out, pkg string, env, flags []string) error {
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s (go %s): %v\n%s", pkg, strings.Join(args, " "), err, b)
	}
	return nil
}

// WaitFor polls cond every 10ms until it holds or d passes, and says
// whether it held: the way a test waits, never a bare sleep.
func WaitFor(d time.Duration, cond func() bool) bool { return WaitEvery(d, 10*time.Millisecond, cond) }

// WaitEvery is WaitFor polling every `every`, for a cond that costs (a
// request to an API server).
func WaitEvery(d, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// HostProcs lists the host's processes whose command line contains m, as
// "/proc/PID/cmdline: ARGV" (the host sees every process of the sandboxes'
// pid namespaces).
func HostProcs(m string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, _ := os.ReadFile(d); strings.Contains(string(b), m) {
			found = append(found, d+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// CancelOn is a writer that calls Cancel once what it got contains Word.
type CancelOn struct {
	Word   string
	Cancel context.CancelFunc

	mu  sync.Mutex
	got bytes.Buffer
}

func (c *CancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got.Write(p)
	if strings.Contains(c.got.String(), c.Word) {
		c.Cancel()
	}
	return len(p), nil
}
