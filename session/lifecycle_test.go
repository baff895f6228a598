package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// The session's lifecycle on sandboxtest.Fake, a backend without processes:
// what is claimed, attached, released and re-claimed, checked by counts and
// channels, without kills or waits. What a real sandbox does with the files
// is session_test.go's.

func fakeManager(f *fixture, p *sandboxtest.Fake) *Manager { return NewManager(f.root, p, nil) }

func fakeOpen(t *testing.T, m *Manager, f *fixture, name string, keep bool) *Session {
	t.Helper()
	s, err := m.Open(context.Background(), name, Params{CodeDirs: []string{f.code}, IdleTTL: time.Hour, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fakeExec(t *testing.T, s *Session, command string) (Outcome, error) {
	t.Helper()
	var out bytes.Buffer
	return s.Exec(context.Background(), Run{Command: command, Stdout: &out, Stderr: &out, Timeout: 30 * time.Second})
}

// resets reports whether the sync request of a round trip pushed the whole
// host tree (every code dir reset), as into a new sandbox.
func resets(t *testing.T, req []byte) bool {
	t.Helper()
	var r sbxsync.HelperRequest
	if err := json.Unmarshal(req, &r); err != nil {
		t.Fatalf("sync request: %v", err)
	}
	for _, d := range r.Dirs {
		if !d.Reset {
			return false
		}
	}
	return len(r.Dirs) > 0
}

// TestClaimOnFirstUseAndReclaimAfterLoss: no sandbox until the first
// command; one for every later command; a sandbox found gone before a
// command starts is replaced, the host tree pushed into the new one (a
// reset request), and the command run there, with a notice.
func TestClaimOnFirstUseAndReclaimAfterLoss(t *testing.T) {
	f := newFixture(t)
	p := &sandboxtest.Fake{}
	s := fakeOpen(t, fakeManager(f, p), f, "life", false)
	t.Cleanup(func() { s.Release(context.Background()) })
	if n := p.Claims(); n != 0 {
		t.Fatalf("Open claimed %d sandboxes: a sandbox is claimed on first use", n)
	}
	for i := 0; i < 2; i++ {
		if o, err := fakeExec(t, s, "make test"); err != nil || o.ExitCode != 0 {
			t.Fatalf("command %d: %v %+v", i+1, err, o)
		}
	}
	boxes := p.Sandboxes()
	if p.Claims() != 1 || len(boxes) != 1 {
		t.Fatalf("after two commands: %d claims, want 1", p.Claims())
	}
	reqs := boxes[0].Requests()
	if len(reqs) != 2 || !resets(t, reqs[0]) || resets(t, reqs[1]) {
		t.Fatalf("the first round trip pushes the whole tree, the second only changes: %d requests", len(reqs))
	}

	boxes[0].Lose()
	if o, err := fakeExec(t, s, "make test"); err != nil || o.ExitCode != 0 {
		t.Fatalf("the command after the loss should run in a new sandbox: %v %+v", err, o)
	}
	boxes = p.Sandboxes()
	if p.Claims() != 2 || len(boxes) != 2 {
		t.Fatalf("after the loss: %d claims, want 2", p.Claims())
	}
	if n := boxes[0].Execs(); n != 3 {
		t.Fatalf("the lost sandbox saw %d execs, want 3: the engine tries it before re-claiming", n)
	}
	if reqs := boxes[1].Requests(); len(reqs) != 1 || !resets(t, reqs[0]) {
		t.Fatalf("the new sandbox's first round trip must push the whole host tree")
	}
	if cmds := boxes[1].Commands(); len(cmds) != 1 || !strings.Contains(strings.Join(cmds[0], " "), "make test") {
		t.Fatalf("the new sandbox ran %q, want the command", cmds)
	}
	if notes := strings.Join(s.Notices(), "\n"); !strings.Contains(notes, "a new one was claimed") {
		t.Errorf("no notice of the re-claim: %q", notes)
	}
}

// TestLostWhileRunning: a sandbox lost while its command runs fails that
// command with ErrLost (it may have run: it is not run again), and the next
// command claims a new sandbox.
func TestLostWhileRunning(t *testing.T) {
	f := newFixture(t)
	p := &sandboxtest.Fake{}
	s := fakeOpen(t, fakeManager(f, p), f, "lostrun", false)
	t.Cleanup(func() { s.Release(context.Background()) })
	g := p.Block("long job")
	done := make(chan error, 1)
	go func() {
		_, err := fakeExec(t, s, "long job")
		done <- err
	}()
	<-g.Started()
	p.Sandboxes()[0].Lose()
	if err := <-done; !errors.Is(err, sandbox.ErrLost) || errors.Is(err, sandbox.ErrUnreachable) {
		t.Fatalf("the command whose sandbox was lost: %v, want ErrLost", err)
	}
	if o, err := fakeExec(t, s, "next"); err != nil || o.ExitCode != 0 {
		t.Fatalf("the next command: %v %+v", err, o)
	}
	if n := p.Claims(); n != 2 {
		t.Fatalf("%d claims, want 2: a new sandbox after the loss", n)
	}
	if n := p.Sandboxes()[0].Execs(); n != 1 {
		t.Fatalf("the lost sandbox saw %d execs, want 1: the lost command is not run again", n)
	}
}

// TestKeepOnClose: Close releases a session's sandbox unless it is kept; a
// kept one is attached by the next Open of its name (a new manager, as a
// later process), and its next command runs there, claiming nothing.
func TestKeepOnClose(t *testing.T) {
	f := newFixture(t)
	p := &sandboxtest.Fake{}
	plain := fakeOpen(t, fakeManager(f, p), f, "plain", false)
	if _, err := fakeExec(t, plain, "true"); err != nil {
		t.Fatal(err)
	}
	if err := plain.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !p.Sandboxes()[0].IsReleased() {
		t.Fatal("Close kept the sandbox of a session not kept")
	}

	kept := fakeOpen(t, fakeManager(f, p), f, "kept", true)
	if _, err := fakeExec(t, kept, "true"); err != nil {
		t.Fatal(err)
	}
	if err := kept.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	box := p.Sandboxes()[1]
	if box.IsReleased() {
		t.Fatal("Close released a kept session's sandbox")
	}
	again := fakeOpen(t, fakeManager(f, p), f, "kept", false)
	t.Cleanup(func() { again.Release(context.Background()) })
	if n := p.Attaches(); n != 1 {
		t.Fatalf("reopening the kept session attached %d times, want 1", n)
	}
	if _, err := fakeExec(t, again, "true"); err != nil {
		t.Fatal(err)
	}
	if n := p.Claims(); n != 2 || box.Execs() != 2 {
		t.Fatalf("%d claims, %d execs in the kept sandbox: the reopened session should run in it", n, box.Execs())
	}
	if err := again.Release(context.Background()); err != nil || !box.IsReleased() {
		t.Fatalf("Release of the reattached session: %v, released %v", err, box.IsReleased())
	}
}

// TestOpenedBeforeAnotherProcessClaimed: two processes of one kept session
// (two first `sbx exec --keep` calls at once) both open it before either
// has claimed; the one whose command runs second finds, under the lock,
// that the other claimed meanwhile, and runs in that sandbox instead of
// claiming one of its own (whose claim would remove the other's workspace).
func TestOpenedBeforeAnotherProcessClaimed(t *testing.T) {
	f := newFixture(t)
	p := &sandboxtest.Fake{}
	first := fakeOpen(t, fakeManager(f, p), f, "two", true)
	second := fakeOpen(t, fakeManager(f, p), f, "two", true) // another process's Manager
	t.Cleanup(func() { first.Release(context.Background()) })
	for i, s := range []*Session{first, second} {
		if o, err := fakeExec(t, s, "make test"); err != nil || o.ExitCode != 0 {
			t.Fatalf("command %d: %v %+v", i+1, err, o)
		}
	}
	boxes := p.Sandboxes()
	if p.Claims() != 1 || len(boxes) != 1 {
		t.Fatalf("%d claims, want 1: the second process claimed a sandbox of its own", p.Claims())
	}
	if n := boxes[0].Execs(); n != 2 {
		t.Fatalf("the session's sandbox ran %d commands, want both", n)
	}
	if reqs := boxes[0].Requests(); len(reqs) != 2 || resets(t, reqs[1]) {
		t.Fatalf("the second command's round trip must go on from the first's sync, not push the whole tree again")
	}
}
