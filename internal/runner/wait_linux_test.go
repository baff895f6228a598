package runner

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// tidIsolation records the thread its Wait ran on.
type tidIsolation struct {
	groupIsolation
	waitTid int
}

func (g *tidIsolation) Wait(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	g.waitTid = syscall.Gettid()
	return WaitStatus(cmd)
}

// TestWaitOnTheCallersThread: a command without a timeout or a cancel (the
// local worker's: its init times it) is waited for on the caller's own
// thread, the worker's locked main thread, not on a goroutine that would
// have to wake it; with a timeout the wait is still raced against it.
func TestWaitOnTheCallersThread(t *testing.T) {
	done := make(chan [2]int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		iso := &tidIsolation{}
		res := Run(&Cmd{Argv: []string{"true"}, Env: []string{path}}, iso)
		if res.ExitCode != 0 {
			t.Errorf("true: exit %d (%s)", res.ExitCode, res.Error)
		}
		done <- [2]int{syscall.Gettid(), iso.waitTid}
	}()
	if tids := <-done; tids[0] != tids[1] {
		t.Fatalf("the wait ran on thread %d, the caller is locked to %d", tids[1], tids[0])
	}
	res, _ := run(t, &Cmd{Argv: []string{"sleep", "5"}, Env: []string{path}, Timeout: 50 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != sandbox.TimeoutExitCode {
		t.Fatalf("sleep 5 with a 50 ms timeout: %+v", res)
	}
}
