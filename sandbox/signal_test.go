package sandbox

import "testing"

func TestSignalName(t *testing.T) {
	for n, want := range map[int]string{9: "SIGKILL", 15: "SIGTERM", 1: "SIGHUP", 31: "SIGSYS", 34: "signal 34", 0: "signal 0", -1: "signal -1"} {
		if got := SignalName(n); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", n, got, want)
		}
	}
}
