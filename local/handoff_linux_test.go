package local

import (
	"syscall"
	"testing"
)

// TestCommandAfterItsIdleWorkerWasKilled: a command handed to an idle worker
// that was killed a moment before (as the OOM killer would: the init has not
// seen it die yet) runs in another worker, whether the hand-off's write
// fails or the dying worker's socket takes the frame and resets. Every
// command runs, once.
func TestCommandAfterItsIdleWorkerWasKilled(t *testing.T) {
	sb, _ := claim(t, nil)
	init := sb.(*box).st.Pid
	if out, res := run(t, sb, "echo first"); out != "first\n" || res.ExitCode != 0 {
		t.Fatalf("first command: %q %+v", out, res)
	}
	for i := range 30 {
		for _, w := range workersSettle(t, init, 1) {
			syscall.Kill(w, syscall.SIGKILL)
		}
		out, res := run(t, sb, "echo ran >>count; echo ok")
		if out != "ok\n" || res.ExitCode != 0 {
			t.Fatalf("command %d after its worker was killed: %q %+v", i, out, res)
		}
	}
	out, _ := run(t, sb, "wc -l <count")
	if out != "30\n" {
		t.Fatalf("the commands ran %q times, want 30", out)
	}
}
