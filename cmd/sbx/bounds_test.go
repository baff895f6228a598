package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMeasured runs sbx and returns its result and the peak resident memory
// of the sbx process (and the processes it waited for), in bytes.
func (w *world) runMeasured(t *testing.T, env []string, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, args...)
	cmd.Dir = w.code
	cmd.Env = append(append([]string{}, w.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sbx %v: %v", args, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return result{stdout.String(), stderr.String(), code}, ru.Maxrss << 10
}

// A command that floods fd 3 (where the shell reports its working
// directory) costs the host nothing: sbx reads at most PATH_MAX of it,
// ignores the report and says so. It once grew sbx to 22 GB.
func TestFd3FloodIsBounded(t *testing.T) {
	w := newWorld(t)
	r, rss := w.runMeasured(t, nil, "exec", "--", "head -c 400M /dev/zero >&3; echo done")
	if r.code != 0 || r.stdout != "done\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if rss > 150<<20 {
		t.Errorf("sbx peaked at %d MiB resident for a 400 MiB flood of fd 3: the report is not bounded", rss>>20)
	}
	if !strings.Contains(r.stderr, "fd 3 was ignored") || !strings.Contains(r.stderr, "over 4096 bytes") {
		t.Errorf("no note about the ignored report; stderr:\n%s", r.stderr)
	}
}
