//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/sandbox"
)

// fakeInit serves one exec on a unix socket as the init would, answering
// with r, and returns what the request carried.
func fakeInit(t *testing.T, r reply) (*box, <-chan request) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "init.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan request, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := newConn(nc.(*net.UnixConn))
		defer c.Close()
		var req request
		files, err := c.readFrame(&req)
		closeAll(files) // the host's ends of its pipes: their copies end
		if err != nil {
			return
		}
		got <- req
		c.writeFrame(r)
	}()
	return &box{st: state{Socket: sock, HostUID: os.Geteuid(), HostGID: os.Getegid()}}, got
}

// TestInlinePullBounded: the reply's inline pull and fd 3 report come from
// the sandbox side; a pull over inlineSync is refused as a lost sandbox
// (nothing of it reaches the sync), a report over sandbox.MaxFd3+1 bytes is
// cut to them.
func TestInlinePullBounded(t *testing.T) {
	b, _ := fakeInit(t, reply{Done: true, Sync: []byte(`{}`), Pull: bytes.Repeat([]byte{'x'}, inlineSync+1)})
	var pull bytes.Buffer
	_, err := b.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}, Sync: &sandbox.SyncIO{Request: []byte(`{}`), Push: strings.NewReader(""), Pull: &pull}})
	if !errors.Is(err, sandbox.ErrLost) || pull.Len() != 0 {
		t.Fatalf("an inline pull of %d bytes: err %v, %d bytes handed to the sync; want ErrLost and none", inlineSync+1, err, pull.Len())
	}
	b, _ = fakeInit(t, reply{Done: true, Fd3: bytes.Repeat([]byte{'/'}, 1<<20)})
	var fd3 bytes.Buffer
	if _, err := b.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}, Fd3: &fd3}); err != nil || fd3.Len() != sandbox.MaxFd3+1 {
		t.Fatalf("a 1 MiB fd 3 report: err %v, kept %d bytes, want %d", err, fd3.Len(), sandbox.MaxFd3+1)
	}
}

// TestSmallPushInline: a push within inlineSync travels in the request's
// frame (no descriptor), a larger one through the "push" pipe.
func TestSmallPushInline(t *testing.T) {
	for _, n := range []int{0, 1000, inlineSync, inlineSync + 1} {
		b, got := fakeInit(t, reply{Done: true, Sync: []byte(`{}`)})
		push := bytes.Repeat([]byte{'p'}, n)
		_, err := b.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}, Sync: &sandbox.SyncIO{Request: []byte(`{}`), Push: bytes.NewReader(push), Pull: &bytes.Buffer{}}})
		if err != nil {
			t.Fatalf("push of %d bytes: %v", n, err)
		}
		req := <-got
		piped := strings.Contains(strings.Join(req.Fds, " "), "push")
		if inline := n <= inlineSync; inline == piped || (inline && !bytes.Equal(req.Push, push)) {
			t.Errorf("push of %d bytes: %d bytes inline, descriptors %q", n, len(req.Push), req.Fds)
		}
	}
}

// fakeInitSends serves one exec as a hostile init might: before its final
// reply it sends the frames that send writes.
func fakeInitSends(t *testing.T, send func(c *conn)) *box {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "init.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := newConn(nc.(*net.UnixConn))
		defer c.Close()
		var req request
		files, err := c.readFrame(&req)
		closeAll(files)
		if err != nil {
			return
		}
		send(c)
	}()
	return &box{st: state{Socket: sock, HostUID: os.Geteuid(), HostGID: os.Getegid()}}
}

// TestPullPipeFromTheSandbox: a pull past inlineSync comes through a pipe
// the sandbox side sends up; the host takes one pipe, for an exec with a
// sync, before the final reply, and nothing else as one: a regular file, a
// second pipe, a pipe for a command without sync, a frame without it or
// with two, one riding on the final reply are each a lost sandbox, and
// nothing of them reaches the sync.
func TestPullPipeFromTheSandbox(t *testing.T) {
	syncCmd := func(pull *bytes.Buffer) *sandbox.Cmd {
		return &sandbox.Cmd{Argv: []string{"true"}, Sync: &sandbox.SyncIO{Request: []byte(`{}`), Push: strings.NewReader(""), Pull: pull}}
	}
	pipeWith := func(t *testing.T, data string) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.WriteString(data); w.Close() }()
		return r
	}
	t.Run("a pipe", func(t *testing.T) {
		big := strings.Repeat("p", inlineSync+100)
		b := fakeInitSends(t, func(c *conn) {
			r := pipeWith(t, big)
			c.writeFrame(reply{PullPipe: true}, r)
			r.Close()
			c.writeFrame(reply{Done: true, Sync: []byte(`{}`)})
		})
		var pull bytes.Buffer
		if _, err := b.Exec(context.Background(), syncCmd(&pull)); err != nil || pull.String() != big {
			t.Fatalf("err %v, %d bytes of the pull, want %d", err, pull.Len(), len(big))
		}
	})
	for _, row := range []struct {
		name string
		cmd  func(*bytes.Buffer) *sandbox.Cmd
		send func(t *testing.T, c *conn)
	}{
		{"a regular file", syncCmd, func(t *testing.T, c *conn) {
			f, err := os.CreateTemp(t.TempDir(), "f")
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("planted")
			f.Seek(0, 0)
			c.writeFrame(reply{PullPipe: true}, f)
			f.Close()
			c.writeFrame(reply{Done: true, Sync: []byte(`{}`)})
		}},
		{"a second pipe", syncCmd, func(t *testing.T, c *conn) {
			for range 2 {
				r := pipeWith(t, "")
				c.writeFrame(reply{PullPipe: true}, r)
				r.Close()
			}
			c.writeFrame(reply{Done: true, Sync: []byte(`{}`)})
		}},
		{"a pipe for a command without sync", func(*bytes.Buffer) *sandbox.Cmd { return &sandbox.Cmd{Argv: []string{"true"}} }, func(t *testing.T, c *conn) {
			r := pipeWith(t, "x")
			c.writeFrame(reply{PullPipe: true}, r)
			r.Close()
			c.writeFrame(reply{Done: true})
		}},
		{"no descriptor", syncCmd, func(t *testing.T, c *conn) {
			c.writeFrame(reply{PullPipe: true})
			c.writeFrame(reply{Done: true, Sync: []byte(`{}`)})
		}},
		{"two descriptors", syncCmd, func(t *testing.T, c *conn) {
			r1, r2 := pipeWith(t, "a"), pipeWith(t, "b")
			c.writeFrame(reply{PullPipe: true}, r1, r2)
			r1.Close()
			r2.Close()
			c.writeFrame(reply{Done: true, Sync: []byte(`{}`)})
		}},
		{"on the final reply", syncCmd, func(t *testing.T, c *conn) {
			r := pipeWith(t, "x")
			c.writeFrame(reply{PullPipe: true, Done: true, Sync: []byte(`{}`)}, r)
			r.Close()
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			b := fakeInitSends(t, func(c *conn) { row.send(t, c) })
			var pull bytes.Buffer
			_, err := b.Exec(context.Background(), row.cmd(&pull))
			if !errors.Is(err, sandbox.ErrLost) || strings.Contains(pull.String(), "planted") {
				t.Fatalf("err %v, pull %q; want ErrLost and nothing of it", err, pull.String())
			}
		})
	}
}

// TestInlineZeros: a small stream's trailing zeros cross a frame as their
// count, and come out as the same bytes; a count from the sandbox side that
// is negative or takes the pull past inlineSync is refused as a lost
// sandbox, with nothing handed to the sync.
func TestInlineZeros(t *testing.T) {
	// The host's push: a patch ends with tar's zero blocks.
	for _, push := range [][]byte{make([]byte, 1024), append([]byte("head\x00mid"), make([]byte, 1536)...), []byte("no zeros")} {
		b, got := fakeInit(t, reply{Done: true, Sync: []byte(`{}`)})
		if _, err := b.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}, Sync: &sandbox.SyncIO{Request: []byte(`{}`), Push: bytes.NewReader(push), Pull: &bytes.Buffer{}}}); err != nil {
			t.Fatal(err)
		}
		req := <-got
		again, err := inlineStream(req.Push, req.PushZeros)
		if err != nil || !bytes.Equal(again, push) || bytes.HasSuffix(req.Push, []byte{0}) {
			t.Errorf("push %q: frame carried %q and %d zeros (%v)", push, req.Push, req.PushZeros, err)
		}
	}
	// The sandbox's pull.
	for _, c := range []struct {
		pull  []byte
		zeros int
		ok    bool
	}{
		{nil, 1024, true},
		{[]byte("tail"), 1020, true},
		{nil, inlineSync, true},
		{nil, inlineSync + 1, false},
		{[]byte("x"), inlineSync, false},
		{[]byte("x"), -1, false},
		{nil, -inlineSync, false},
	} {
		b, _ := fakeInit(t, reply{Done: true, Sync: []byte(`{}`), Pull: c.pull, PullZeros: c.zeros})
		var pull bytes.Buffer
		_, err := b.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}, Sync: &sandbox.SyncIO{Request: []byte(`{}`), Push: strings.NewReader(""), Pull: &pull}})
		if c.ok {
			if want := append(append([]byte{}, c.pull...), make([]byte, c.zeros)...); err != nil || !bytes.Equal(pull.Bytes(), want) {
				t.Errorf("pull %q and %d zeros: err %v, %d bytes handed to the sync, want %d", c.pull, c.zeros, err, pull.Len(), len(want))
			}
		} else if !errors.Is(err, sandbox.ErrLost) || pull.Len() != 0 {
			t.Errorf("pull %q and %d zeros: err %v, %d bytes handed to the sync; want ErrLost and none", c.pull, c.zeros, err, pull.Len())
		}
	}
}
