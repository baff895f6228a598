package sync

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStatCacheAsStatPath: the incremental scan's stat by each directory's
// descriptor says what statPath of the full path says (the oracle), for
// every kind of entry, for what is gone, below a file, and below a link to
// a directory, which statPath follows and the scan skips anyway (its
// parent, a link, comes first): there it says gone.
func TestStatCacheAsStatPath(t *testing.T) {
	root := t.TempDir()
	put(t, filepath.Join(root, "top.go"), "top")
	put(t, filepath.Join(root, "d/e/deep.go"), "deep")
	os.Chmod(filepath.Join(root, "d/e/deep.go"), 0o751)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(root, "d/e/deep.go"), old, old)
	os.Symlink("../top.go", filepath.Join(root, "d/link"))
	os.Symlink(strings.Repeat("x/", 200)+"long", filepath.Join(root, "d/longlink"))
	os.Symlink("e", filepath.Join(root, "d/dirlink"))
	syscall.Mkfifo(filepath.Join(root, "d/fifo"), 0o644)
	os.Mkdir(filepath.Join(root, "d/empty"), 0o700)
	paths := []string{"top.go", "d", "d/e", "d/e/deep.go", "d/link", "d/longlink", "d/fifo", "d/empty",
		"gone", "d/gone", "d/e/gone/deeper", "top.go/below", "d/dirlink"}
	c := newStatCache(root)
	defer c.close()
	for _, p := range paths {
		got, gotOK, gotErr := c.stat(p)
		want, wantOK, wantErr := statPath(filepath.Join(root, p))
		if got != want || gotOK != wantOK || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: %+v %v %v, statPath %+v %v %v", p, got, gotOK, gotErr, want, wantOK, wantErr)
		}
	}
	// Below a link to a directory: statPath follows it, the cache does not.
	if _, ok, err := c.stat("d/dirlink/deep.go"); ok || err != nil {
		t.Errorf("below a link to a directory: found %v, %v", ok, err)
	}
	if _, ok, _ := statPath(filepath.Join(root, "d/dirlink/deep.go")); !ok {
		t.Error("statPath no longer follows a link on the way (the comparison above proves nothing)")
	}
}
