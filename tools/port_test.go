package tools

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/session"
)

// A kept session (a persistent cluster claim in real use; a kept local
// sandbox here) is closed, not released, when sbx-mcp stops: its sandbox
// stays, but the port tool's forward must end with the session that asked
// for it instead of listening on for nobody.
func TestPortForwardEndsWithKeptSession(t *testing.T) {
	code, err := os.MkdirTemp("", "sbxp")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "sbxp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(code); os.RemoveAll(state) })
	mgr := session.NewManager(state, &local.Provider{Version: "test"}, nil)
	p := NewSessions(Config{Manager: mgr, Params: session.Params{CodeDirs: []string{code}, Keep: true}, DefaultName: "keptport"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() { mgr.Release(context.Background(), "keptport") })

	c, err := p.acquire(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.sess.Exec(ctx, session.Run{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	c.done()
	_, out, err := p.port(ctx, nil, PortInput{SandboxPort: 3000})
	if err != nil || len(out.Forwards) != 1 {
		t.Fatalf("port: %v %+v", err, out)
	}
	addr := out.Forwards[0].HostAddr
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("the forward does not listen: %v", err)
	}
	conn.Close()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if infos, _ := mgr.List(ctx); len(infos) != 1 || !infos[0].Claimed {
		t.Fatalf("the kept session's sandbox did not stay: %+v", infos)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 10s after its session was closed", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
