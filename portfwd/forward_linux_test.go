//go:build linux

package portfwd_test

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// TestForwardConnectionBound: anyone who can connect to the host's
// loopback can open connections to a forward, and each held two sockets of
// the host process (sbx-mcp's, for the port tool's forwards) for as long
// as the sandbox's server kept its side: there was no bound, and an accept
// that ran out of descriptors ended the forward. At most MaxConns are held
// at once; one past it is closed at once, and the forward goes on.
func TestForwardConnectionBound(t *testing.T) {
	old := portfwd.MaxConns
	portfwd.MaxConns = 8
	defer func() { portfwd.MaxConns = old }()
	state, err := os.MkdirTemp("", "sbxpf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	work := filepath.Join(state, "work")
	os.MkdirAll(work, 0o755)
	p := &local.Provider{Version: "test"}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "connbound", StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{want: "listening", seen: make(chan struct{})}
	go sb.Exec(ctx, &sandbox.Cmd{
		// Holds every connection; answers each with one byte.
		Argv:   []string{"/usr/bin/node", "-e", `const h=[];require('net').createServer(s=>{h.push(s);s.write('y')}).listen(3002,'127.0.0.1',()=>console.log('listening'))`},
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
		fdone <- portfwd.Forward(fctx, sb.(portfwd.Dialer), state, portfwd.Spec{HostPort: 0, SandboxPort: 3002}, func(a string) { addrs <- a }, t.Logf)
	}()
	defer func() { fcancel(); <-fdone }()
	addr := <-addrs
	base := openSockets(t)
	// The first MaxConns are served (each gets the server's byte).
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < portfwd.MaxConns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, portfwd.MaxConns, err)
		}
	}
	// Past the bound: each is closed, the server never reached.
	for i := 0; i < 40; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || os.IsTimeout(err) {
			t.Fatalf("connection %d past the bound of %d: read %d, %v; want it closed", i+1, portfwd.MaxConns, n, err)
		}
	}
	// The forward's own sockets: two per served connection (the test's
	// client ends are its own: subtract them).
	if got, want := openSockets(t)-base-len(held), 2*portfwd.MaxConns; got > want {
		t.Fatalf("the forward holds %d sockets for %d clients, want at most %d", got, len(held), want)
	}
	// Out of descriptors, the forward waits instead of ending: with this
	// process's limit at what it has open, a client (another process, told
	// to connect by a directory appearing: a mkdir takes no descriptor)
	// makes the forward's accept fail (EMFILE); once the limit is back that
	// client is served.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// A slot for that client, once the forward has closed held[1]'s two
	// sockets (else they are free numbers under the limit below).
	before := openSockets(t)
	held[1].Close()
	for deadline := time.Now().Add(10 * time.Second); openSockets(t) > before-3; {
		if time.Now().After(deadline) {
			t.Fatal("the forward did not close a connection its client closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	flag := filepath.Join(state, "go")
	_, port, _ := net.SplitHostPort(addr)
	client := exec.Command("bash", "-c", `while [ ! -d "$1" ]; do sleep 0.01; done; exec 3<>/dev/tcp/127.0.0.1/$2 && timeout 10 head -c 1 <&3`, "client", flag, port)
	var got strings.Builder
	client.Stdout = &got
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	// The limit is on descriptor numbers: the lowest free number (what a
	// dup gets), so that no new descriptor fits.
	free, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(free)
	low := lim
	low.Cur = uint64(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(flag, 0o755)
	select {
	case err := <-fdone:
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		fdone <- err
		t.Fatalf("the forward ended when out of descriptors: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if err := client.Wait(); err != nil || got.String() != "y" {
		t.Fatalf("the client that came while out of descriptors, once they were back: %v, read %q", err, got.String())
	}
	// A served one that leaves frees its slot.
	held[0].Close()
	deadline := time.Now().Add(40 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := c.Read(make([]byte, 1))
		c.Close()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a slot freed by a client that left was never taken again")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
