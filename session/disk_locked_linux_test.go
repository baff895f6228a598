package session

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenLockedFollowsNoLink: the disk walk adds its owner's bits to a
// locked directory of the sandbox's through the directory itself. A name
// the sandbox swapped for a link (to a locked directory of the user's on
// the host, say) is refused, and the link's target keeps its mode.
func TestOpenLockedFollowsNoLink(t *testing.T) {
	base := t.TempDir()
	host := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(host, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(host, 0)
	t.Cleanup(func() { os.Chmod(host, 0o700) })
	if err := os.Symlink(host, filepath.Join(base, "swapped")); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if fd, _, err := openLocked(dfd, "swapped"); err == nil {
		unix.Close(fd)
		t.Fatal("openLocked opened a directory through a link")
	}
	if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0 {
		t.Fatalf("the link's target: %v %v, want mode 0 as it was", fi.Mode(), err)
	}
	// A locked directory itself is opened, and put back as it was.
	own := filepath.Join(base, "own")
	os.Mkdir(own, 0o700)
	os.WriteFile(filepath.Join(own, "f"), []byte("x"), 0o600)
	os.Chmod(own, 0)
	t.Cleanup(func() { os.Chmod(own, 0o700) })
	fd, restore, err := openLocked(dfd, "own")
	if err != nil {
		t.Fatalf("openLocked of a locked directory of this user's: %v", err)
	}
	names, err := os.NewFile(uintptr(fd), own).Readdirnames(-1)
	if err != nil || len(names) != 1 {
		t.Fatalf("list it: %v %v", names, err)
	}
	restore()
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0 {
		t.Fatalf("after restore: %v %v, want mode 0", fi.Mode(), err)
	}
}
