package sync

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMountInsideTreeKeepsTheLongWindow: the scans cross mount points, so
// a file system mounted inside a tree (it could be a network one, with
// another machine's clock) makes the whole tree keep racyWindow; through
// a symlink to the tree too. Unmounted, the tree is fine again (within
// mountInfoTTL).
func TestMountInsideTreeKeepsTheLongWindow(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "a b", "mnt")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	fresh := func() {
		mountCache.Lock()
		mountCache.at = time.Time{}
		mountCache.Unlock()
		fineCache.Lock()
		fineCache.m = nil
		fineCache.Unlock()
	}
	fresh()
	if !fineTimestamps(root) || !fineTimestamps(link) {
		t.Fatalf("%s (on ext4, tmpfs, XFS or Btrfs, nothing mounted inside) not taken for fine timestamps", root)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs inside the tree (the test runs as root, as CI does): %v", err)
	}
	defer unix.Unmount(sub, unix.MNT_DETACH)
	fresh()
	if fineTimestamps(root) {
		t.Fatal("a tree with a file system mounted inside it (a space in its path) taken for fine timestamps")
	}
	if fineTimestamps(link) {
		t.Fatal("the same tree through a symlink taken for fine timestamps")
	}
	if !fineTimestamps(sub) {
		t.Fatal("the mounted tmpfs itself, nothing inside it, not taken for fine timestamps")
	}
	if err := unix.Unmount(sub, 0); err != nil {
		t.Fatal(err)
	}
	fresh()
	if !fineTimestamps(root) {
		t.Fatal("after the unmount the tree still keeps the long window")
	}
}

// TestMountOverTheRootSeenAtOnce: fineTimestamps keeps its answer for a
// while, but not across a file system mounted over the root itself (the
// root's device changes): a FUSE or NFS mount there gets the long window
// at the next scan, not a second later.
func TestMountOverTheRootSeenAtOnce(t *testing.T) {
	root := t.TempDir()
	if !fineTimestamps(root) {
		t.Fatalf("%s not taken for fine timestamps", root)
	}
	// ramfs: a local file system that is not on the list.
	if err := unix.Mount("ramfs", root, "ramfs", 0, ""); err != nil {
		t.Fatalf("mount a ramfs over the tree (the test runs as root, as CI does): %v", err)
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	if fineTimestamps(root) {
		t.Fatal("a ramfs mounted over the root, within the cache's time, still taken for fine timestamps")
	}
}

// BenchmarkFineTimestamps: the cost of the check at each scan (both sides
// run it for every code dir, every round trip).
//
//	go test ./sync -run XXX -bench FineTimestamps
func BenchmarkFineTimestamps(b *testing.B) {
	root := b.TempDir()
	for b.Loop() {
		fineTimestamps(root)
	}
}
