package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// TestClaimOnFirstUseAndReclaimAfterLoss drives the session's lifecycle
// through sandboxtest's counting provider: no sandbox until the first
// command; a sandbox found gone before a command starts is replaced, the
// host tree pushed into the new one, and the command run there.
func TestClaimOnFirstUseAndReclaimAfterLoss(t *testing.T) {
	f := newFixture(t)
	p := sandboxtest.Wrap(&local.Provider{Version: "test"})
	s, err := NewManager(f.root, p, nil).Open(context.Background(), "life", Params{CodeDirs: []string{f.code}, IdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release(context.Background()) })
	if n := p.Claims(); n != 0 {
		t.Fatalf("Open claimed %d sandboxes: a sandbox is claimed on first use", n)
	}
	if out, o := sh(t, s, "cat keep.txt"); out != "keep\n" || o.Result.ExitCode != 0 {
		t.Fatalf("first command: %q %+v", out, o)
	}
	boxes := p.Sandboxes()
	if p.Claims() != 1 || len(boxes) != 1 {
		t.Fatalf("after the first command: %d claims, %d sandboxes, want 1", p.Claims(), len(boxes))
	}
	sh(t, s, "echo again > /tmp/mark")
	if p.Claims() != 1 {
		t.Fatalf("a second command claimed again: %d claims", p.Claims())
	}

	if err := boxes[0].Lose(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, o := sh(t, s, "cat keep.txt; cat /tmp/mark 2>&1; true")
	if o.Result.ExitCode != 0 || !strings.HasPrefix(out, "keep\n") || !strings.Contains(out, "No such file") {
		t.Fatalf("the command after the loss should run in a new sandbox with the host tree: %q %+v", out, o)
	}
	if p.Claims() != 2 || len(p.Sandboxes()) != 2 {
		t.Fatalf("after the loss: %d claims, want 2", p.Claims())
	}
	if boxes[0].Execs() < 3 {
		t.Fatalf("the lost sandbox saw %d execs: the engine did not try it before re-claiming", boxes[0].Execs())
	}
	if notes := strings.Join(s.Notices(), "\n"); !strings.Contains(notes, "a new one was claimed") {
		t.Errorf("no notice of the re-claim: %q", notes)
	}
}
