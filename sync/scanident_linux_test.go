//go:build linux

package sync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file replaced by another of the same size and mtime (a rename over it:
// a new inode) is found changed by the next scan: the scan's statx must
// bring the inode and the ctime, not only size and mtime.
func TestScanSeesAReplacedFileOfTheSameSizeAndMTime(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	old := time.Now().Add(-time.Hour)
	os.WriteFile(f, []byte("aaaa"), 0o644)
	os.Chtimes(f, old, old)
	prev, err := (&Scanner{}).Scan(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	os.WriteFile(tmp, []byte("bbbb"), 0o644)
	os.Chtimes(tmp, old, old)
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	cur, err := (&Scanner{}).Scan(dir, prev)
	if err != nil {
		t.Fatal(err)
	}
	if ch := Diff(prev, cur); len(ch) != 1 || ch[0].Path != "f" {
		t.Fatalf("changes after replacing f by a file of its size and mtime: %+v, want f", ch)
	}
}
