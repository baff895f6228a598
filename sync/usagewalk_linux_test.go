package sync

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// TestUsageWalksAgree: the descriptor walk of a full count (walkAll)
// finds what the os.Root walk finds, entry by entry: costs, directories,
// the names of hard-linked files and the total, on a tree with sparse and
// hard-linked files, symlinks (to a file, to a directory in the tree, out
// of it), a fifo, an empty directory and a chain deeper than the
// descriptor walk holds open.
func TestUsageWalksAgree(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "big"), make([]byte, 1<<20), 0o644)
	for i := 0; i < 30; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%d", i%5), fmt.Sprintf("s%d", i%3))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), make([]byte, i*1000), 0o644)
	}
	f, _ := os.Create(filepath.Join(root, "sparse"))
	f.Truncate(8 << 20)
	f.Close()
	os.Link(filepath.Join(root, "d1/s1/f1"), filepath.Join(root, "d2/hard"))
	os.Link(filepath.Join(root, "d1/s1/f1"), filepath.Join(root, "hard2"))
	os.Symlink("d1", filepath.Join(root, "tod1"))
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("d1/s1/f1", filepath.Join(root, "tofile"))
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := root
	for i := 0; i < usageFdDepth+5; i++ {
		deep = filepath.Join(deep, "n")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "leaf"), []byte(strings.Repeat("x", 5000)), 0o644)

	fast := NewUsage(root)
	defer fast.Close()
	total, err := fast.Total()
	if err != nil {
		t.Fatal(err)
	}
	slow := NewUsage(root)
	defer slow.Close()
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if slow.n, err = newInotifyMode(root, true); err != nil {
		t.Fatal(err)
	}
	slow.cost, slow.names, slow.inoOf, slow.dirs = map[string]int64{}, map[uint64]map[string]bool{}, map[string]uint64{}, map[string]bool{}
	if !slow.walk(r, "") {
		t.Fatal("the os.Root walk failed")
	}
	if total != slow.total || total != duOracle(root) {
		t.Errorf("totals: descriptor walk %d, os.Root walk %d, plain walk %d", total, slow.total, duOracle(root))
	}
	for name, pair := range map[string][2]any{
		"costs": {fast.cost, slow.cost}, "dirs": {fast.dirs, slow.dirs},
		"names": {fast.names, slow.names}, "inodes": {fast.inoOf, slow.inoOf},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s differ:\n descriptor walk %v\n os.Root walk    %v", name, pair[0], pair[1])
		}
	}
	if len(fast.names) != 1 {
		t.Errorf("the hard-linked file's names: %v, want one inode with three names", fast.names)
	}
	if !fast.n.watched(strings.TrimPrefix(filepath.ToSlash(strings.TrimPrefix(deep, root)), "/")) {
		t.Error("the deepest directory is not watched")
	}
}
