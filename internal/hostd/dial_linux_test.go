package hostd

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A client checks the state dir and its socket, then connects. Whoever can
// write a parent of the state dir could swap the directory in between for
// one of theirs (a symlink to it): the connect must still reach the socket
// of the directory checked.
func TestDialReachesTheCheckedDir(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "state")
	other := filepath.Join(root, "other")
	for _, d := range []string{state, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{state, other} {
		ln, err := net.Listen("unix", filepath.Join(d, "hostd.sock"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	afterCheck = func() {
		if err := os.Rename(state, state+".checked"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(other, state); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterCheck = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, state)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	// A unix socket's peer address is the name its listener was bound to.
	if got, want := c.RemoteAddr().String(), filepath.Join(state, "hostd.sock"); got != want {
		t.Fatalf("connected to %s, want the checked directory's socket %s", got, want)
	}
}

// What the client refuses before it connects at all.
func TestDialRefusesWhatIsNotPrivate(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, mode os.FileMode, sock bool) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if sock {
			ln, err := net.Listen("unix", filepath.Join(d, "hostd.sock"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		} else if err := os.WriteFile(filepath.Join(d, "hostd.sock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	good := mk("good", 0o700, true)
	link := filepath.Join(root, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	sockLinkDir := mk("socklink", 0o700, false)
	os.Remove(filepath.Join(sockLinkDir, "hostd.sock"))
	if err := os.Symlink(filepath.Join(good, "hostd.sock"), filepath.Join(sockLinkDir, "hostd.sock")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{mk("open", 0o755, true), "not a private directory"},
		{link, "open " + link},
		{mk("file", 0o700, false), "is not a socket"},
		{sockLinkDir, "is not a socket"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := dial(ctx, tc.dir)
		cancel()
		if err == nil {
			c.Close()
			t.Errorf("%s: dialed, want a refusal (%s)", tc.dir, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.dir, err, tc.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, good)
	if err != nil {
		t.Fatalf("the private dir: %v", err)
	}
	c.Close()
}
