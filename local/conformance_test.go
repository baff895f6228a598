//go:build linux

package local

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// TestConformance runs the sandbox contract's suite against the local
// backend.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Backend{
		New: func(t *testing.T, l sandbox.Limits) sandbox.Sandbox {
			sb, _ := claim(t, func(s *sandbox.Spec) { s.Limits = l })
			return sb
		},
		Lose:   func(t *testing.T, sb sandbox.Sandbox) { loseInit(t, sb.(*box)) },
		Limits: true,
	})
}

// loseInit kills the sandbox's init behind the provider's back, as the OOM
// killer would, and waits until it is gone.
func loseInit(t *testing.T, b *box) {
	t.Helper()
	pid, err := InitPid(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the sandbox's init %d: %v", pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	// Gone means the init has died and so has everything of the sandbox
	// that held its socket: a connection is refused.
	for b.alive() || answers(b.st.Socket) {
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox of init %d is still there 10s after SIGKILL", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answers reports whether something still accepts connections on sock.
func answers(sock string) bool {
	c, err := net.Dial("unix", sock)
	if err == nil {
		c.Close()
	}
	return err == nil
}
