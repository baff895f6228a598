package runner

import (
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/sandbox"
)

// sandbox.SignalName's table against the kernel headers' names, as x/sys
// has them.
func TestSignalNamesMatchLinux(t *testing.T) {
	for n := 1; n < 32; n++ {
		if got, want := sandbox.SignalName(n), unix.SignalName(syscall.Signal(n)); got != want {
			t.Errorf("SignalName(%d) = %q, Linux names it %q", n, got, want)
		}
	}
}
