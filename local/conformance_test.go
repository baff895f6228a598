//go:build linux

package local

import (
	"context"
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

// TestProviderConforms runs the suite on sandboxtest's counting wrapper over
// the local backend: lifecycle tests that use the wrapper test a backend
// that keeps the contract.
func TestProviderConforms(t *testing.T) {
	p := sandboxtest.Wrap(&Provider{Version: "test"})
	sandboxtest.Run(t, sandboxtest.Backend{
		New: func(t *testing.T, l sandbox.Limits) sandbox.Sandbox {
			state := shortTempDir(t)
			sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "t", StateDir: state, Limits: l})
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			t.Cleanup(func() { sb.Release(context.Background()) })
			return sb
		},
		Lose: func(t *testing.T, sb sandbox.Sandbox) {
			if err := sb.(*sandboxtest.Sandbox).Lose(context.Background()); err != nil {
				t.Fatalf("lose: %v", err)
			}
		},
		Limits: true,
	})
	// One shared, one each for Release, ReleaseKillsRunning, LostMidCommand,
	// LimitPids and LimitMemory.
	if n := p.Claims(); n != 6 {
		t.Errorf("the wrapper counted %d claims, want the suite's 6", n)
	}
}
