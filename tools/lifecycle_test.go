package tools

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
	"github.com/sbx-sh/sbx/session"
)

// The MCP pool's lifecycle on sandboxtest.Fake, through the real server
// and a real MCP client over in-memory transports: what is claimed, reaped,
// dropped, kept and re-claimed, checked by counts and channels, without
// processes, kills or sleeps. What a real sandbox does with the files is
// reap_test.go's and test/mcp's.

// deadline bounds every wait for something the pool does on its own.
const deadline = 30 * time.Second

type poolWorld struct {
	fake *sandboxtest.Fake
	root string // the manager's state root
	code string
	pool *Sessions
	cs   *mcp.ClientSession
}

// newPool starts a pool of one stdio-like session (no Key) on fake, serves
// it, and connects a client.
func newPool(t *testing.T, fake *sandboxtest.Fake, root, code string, keep bool) *poolWorld {
	t.Helper()
	w := &poolWorld{fake: fake, root: root, code: code}
	w.pool = NewSessions(Config{
		Manager:     session.NewManager(root, fake, nil),
		Params:      session.Params{CodeDirs: []string{code}, IdleTTL: time.Hour, Keep: keep},
		DefaultName: "pool",
	})
	t.Cleanup(func() { w.pool.Close(context.Background()) })
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ss, err := NewServer("test", w.pool).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	if w.cs, err = mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cs.Close() })
	return w
}

func poolDirs(t *testing.T) (root, code string) {
	t.Helper()
	code, err := os.MkdirTemp("", "sbxl")
	if err != nil {
		t.Fatal(err)
	}
	root, err = os.MkdirTemp("", "sbxl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(code); os.RemoveAll(root) })
	return root, code
}

// bash calls the bash tool and returns its text; it fails the test on an
// error result.
func (w *poolWorld) bash(t *testing.T, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := w.cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatalf("bash %q: %v", command, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("bash %q: error result: %s", command, text.String())
	}
	return text.String()
}

func released(t *testing.T, box *sandboxtest.FakeSandbox, why string) {
	t.Helper()
	select {
	case <-box.Released():
	case <-time.After(deadline):
		t.Fatalf("the sandbox was not released %s after %s", deadline, why)
	}
}

// TestPoolClaimsOnFirstCall: connecting and listing the tools claim
// nothing; the first bash call claims one sandbox, later calls use it.
func TestPoolClaimsOnFirstCall(t *testing.T) {
	root, code := poolDirs(t)
	w := newPool(t, &sandboxtest.Fake{}, root, code, false)
	if _, err := w.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := w.fake.Claims(); n != 0 {
		t.Fatalf("connecting claimed %d sandboxes: a sandbox is claimed on the first call", n)
	}
	w.bash(t, "make")
	w.bash(t, "make test")
	if n := w.fake.Claims(); n != 1 {
		t.Fatalf("two calls claimed %d sandboxes, want 1", n)
	}
	if n := w.fake.Sandboxes()[0].Execs(); n != 2 {
		t.Fatalf("the sandbox ran %d commands, want 2", n)
	}
}

// TestPoolReapsIdle: a session idle past its TTL loses its sandbox (it is
// released); the next call claims a new one and says why.
func TestPoolReapsIdle(t *testing.T) {
	root, code := poolDirs(t)
	w := newPool(t, &sandboxtest.Fake{}, root, code, false)
	w.bash(t, "make")
	w.pool.reapOnce(time.Now().Add(30*time.Minute), time.Hour)
	if w.fake.Sandboxes()[0].IsReleased() {
		t.Fatal("the reaper released a sandbox used within its TTL")
	}
	w.pool.reapOnce(time.Now().Add(2*time.Hour), time.Hour)
	released(t, w.fake.Sandboxes()[0], "the reap")
	out := w.bash(t, "make")
	if n := w.fake.Claims(); n != 2 {
		t.Fatalf("the call after the reap: %d claims, want 2", n)
	}
	if !strings.Contains(out, "released after 1h0m0s without use") {
		t.Errorf("the call after the reap was not told its sandbox is new:\n%s", out)
	}
}

// TestPoolDropsOnDisconnect: when the client goes, its session's sandbox
// is released, without the server's Close.
func TestPoolDropsOnDisconnect(t *testing.T) {
	root, code := poolDirs(t)
	w := newPool(t, &sandboxtest.Fake{}, root, code, false)
	w.bash(t, "make")
	w.cs.Close()
	released(t, w.fake.Sandboxes()[0], "the client disconnected")
}

// TestPoolKeepsOnCloseAndDisconnect: a kept session outlives its client
// and its server; the next server with its name attaches it and runs
// there, claiming nothing.
func TestPoolKeepsOnCloseAndDisconnect(t *testing.T) {
	root, code := poolDirs(t)
	fake := &sandboxtest.Fake{}
	w := newPool(t, fake, root, code, true)
	w.bash(t, "make")
	box := fake.Sandboxes()[0]
	w.cs.Close()
	// The disconnect's drop ends with the entry out of the pool; then its
	// close, counted by dropping, is waited for.
	for end := time.Now().Add(deadline); ; {
		w.pool.mu.Lock()
		_, there := w.pool.entries["pool"]
		w.pool.mu.Unlock()
		if !there {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the pool kept the entry of a client that disconnected")
		}
		time.Sleep(time.Millisecond)
	}
	w.pool.dropping.Wait()
	if err := w.pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if box.IsReleased() {
		t.Fatal("a kept session's sandbox was released when its client or server went")
	}
	w2 := newPool(t, fake, root, code, true)
	w2.bash(t, "make test")
	if fake.Claims() != 1 || fake.Attaches() != 1 || box.Execs() != 2 {
		t.Fatalf("the next server: %d claims, %d attaches, %d commands in the kept sandbox; want 1, 1, 2", fake.Claims(), fake.Attaches(), box.Execs())
	}
}

// TestPoolReclaimsAfterLoss: a sandbox found gone before a call's command
// starts is replaced, and the call runs and says so.
func TestPoolReclaimsAfterLoss(t *testing.T) {
	root, code := poolDirs(t)
	w := newPool(t, &sandboxtest.Fake{}, root, code, false)
	w.bash(t, "make")
	w.fake.Sandboxes()[0].Lose()
	out := w.bash(t, "make test")
	if n := w.fake.Claims(); n != 2 {
		t.Fatalf("the call after the loss: %d claims, want 2", n)
	}
	if cmds := w.fake.Sandboxes()[1].Commands(); len(cmds) != 1 || !strings.Contains(strings.Join(cmds[0], " "), "make test") {
		t.Fatalf("the new sandbox ran %q, want the call's command", cmds)
	}
	if !strings.Contains(out, "a new one was claimed") {
		t.Errorf("the call was not told of the new sandbox:\n%s", out)
	}
}
