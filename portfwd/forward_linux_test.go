//go:build linux

package portfwd_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/portfwd"
	"github.com/sbx-sh/sbx/sandbox"
)

func TestMain(m *testing.M) {
	local.Main()
	os.Exit(m.Run())
}

// lineWriter signals once a line containing want was written.
type lineWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestForwardDropsHalfClosed: a server in the sandbox that accepts and then
// holds every connection, never answering, never closing, cannot make the
// host keep a socket (and goroutines) for each host client that came and
// left: once the host side ends, the sandbox side has HalfCloseLinger to
// end too, then both are closed.
func TestForwardDropsHalfClosed(t *testing.T) {
	old := portfwd.HalfCloseLinger
	portfwd.HalfCloseLinger = 300 * time.Millisecond
	defer func() { portfwd.HalfCloseLinger = old }()
	state, err := os.MkdirTemp("", "sbxpf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	work := filepath.Join(state, "work")
	os.MkdirAll(work, 0o755)
	p := &local.Provider{Version: "test"}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "halfclose", StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{want: "listening", seen: make(chan struct{})}
	go sb.Exec(ctx, &sandbox.Cmd{
		Argv:   []string{"/usr/bin/node", "-e", `const h=[];require('net').createServer(s=>h.push(s)).listen(3001,'127.0.0.1',()=>console.log('listening'))`},
		Dir:    "/srv/code",
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sbx"},
		Stdout: out, Stderr: out, Timeout: time.Minute,
	})
	select {
	case <-out.seen:
	case <-time.After(20 * time.Second):
		t.Fatalf("the server in the sandbox did not start: %q", out.buf.String())
	}
	addrs := make(chan string, 1)
	fctx, fcancel := context.WithCancel(context.Background())
	fdone := make(chan error, 1)
	go func() {
		fdone <- portfwd.Forward(fctx, sb.(portfwd.Dialer), state, portfwd.Spec{HostPort: 0, SandboxPort: 3001}, func(a string) { addrs <- a }, t.Logf)
	}()
	defer func() { fcancel(); <-fdone }()
	addr := <-addrs
	base := openSockets(t)
	const n = 20
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("hello"))
		c.Close()
	}
	// Each host client has left; the sandbox holds its side of each.
	deadline := time.Now().Add(15 * time.Second)
	for {
		held := openSockets(t) - base
		if held <= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets still open on the host for %d host clients that left, after %s (linger %s)", held, n, 15*time.Second, portfwd.HalfCloseLinger)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A client that stays is not cut: only an ended side starts the
	// linger (its read times out, it does not see the forward close).
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "x")
	c.SetReadDeadline(time.Now().Add(5 * portfwd.HalfCloseLinger))
	if _, err := c.Read(make([]byte, 1)); err == nil || !os.IsTimeout(err) {
		t.Fatalf("a client that stays, after the linger: %v, want its own read timeout", err)
	}
}

// openSockets counts this process's open socket descriptors other than
// unix sockets (the provider's connections to the init come and go on
// their own): the forward's TCP sockets, host side and sandbox side.
func openSockets(t *testing.T) int {
	t.Helper()
	unix := map[string]bool{}
	raw, err := os.ReadFile("/proc/self/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 7 {
			unix["socket:["+f[6]+"]"] = true
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") && !unix[l] {
			n++
		}
	}
	return n
}
