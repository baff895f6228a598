package session

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// TestNoClaimNeverClaims: a NoClaim command (the host daemon's first round
// trip, on no one's behalf) runs only in the sandbox the session holds: with
// none claimed yet, or with the one it held found gone (a release or a
// death between the daemon's checks and its round trip), it fails with
// ErrNoSandbox and claims nothing, where another command would claim a new
// sandbox (which was left running for a released session).
func TestNoClaimNeverClaims(t *testing.T) {
	f := newFixture(t)
	p := &sandboxtest.Fake{}
	s := fakeOpen(t, fakeManager(f, p), f, "noclaim", true)
	t.Cleanup(func() { s.Release(context.Background()) })
	noClaim := func() error {
		var out bytes.Buffer
		_, err := s.Exec(context.Background(), Run{Argv: []string{"/bin/true"}, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second, NoClaim: true})
		return err
	}
	if err := noClaim(); !errors.Is(err, ErrNoSandbox) || p.Claims() != 0 {
		t.Fatalf("before any claim: %v, %d claims; want ErrNoSandbox and none", err, p.Claims())
	}
	if o, err := fakeExec(t, s, "true"); err != nil || o.ExitCode != 0 {
		t.Fatalf("a command: %v %+v", err, o)
	}
	if err := noClaim(); err != nil {
		t.Fatalf("in the sandbox the session holds: %v", err)
	}
	p.Sandboxes()[0].Lose()
	if err := noClaim(); !errors.Is(err, ErrNoSandbox) || p.Claims() != 1 {
		t.Fatalf("with its sandbox gone: %v, %d claims; want ErrNoSandbox and still 1", err, p.Claims())
	}
}
