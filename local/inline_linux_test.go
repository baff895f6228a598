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
