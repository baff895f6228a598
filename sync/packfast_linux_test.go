package sync

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPackFileAtAsRoot: a patch packed with each file opened by its
// directory's descriptor (packFileAt) is byte for byte the patch packed
// through the root (writeEntry's own way, the oracle): files at the top and
// deep down, empty and larger than the copy buffer, one gone since the
// scan (sent as deleted), one swapped for a link (refused either way) and
// one for a directory.
func TestPackFileAtAsRoot(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"top.go":              "package top\n",
		"empty":               "",
		"a/b/c/deep.go":       strings.Repeat("deep\n", 10),
		"a/b/big.bin":         strings.Repeat("0123456789abcdef", 20000), // 320,000 bytes: several reads
		"a/x.go":              "x\n",
		"swapped/to-link":     "was a file\n",
		"swapped/to-dir/file": "",
	}
	old := time.Now().Add(-time.Hour) // mtime apart from ctime
	for p, c := range files {
		put(t, filepath.Join(dir, p), c)
		os.Chtimes(filepath.Join(dir, p), old, old)
	}
	os.Chmod(filepath.Join(dir, "a/x.go"), 0o751)
	if err := os.Remove(filepath.Join(dir, "swapped/to-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../top.go", filepath.Join(dir, "swapped/to-link")); err != nil {
		t.Fatal(err)
	}
	changes := []Change{}
	for _, p := range []string{"top.go", "empty", "a/b/c/deep.go", "a/b/big.bin", "a/x.go", "gone.go", "a/gone/too.go", "swapped/to-dir", "swapped/to-link"} {
		changes = append(changes, Change{Path: p, Entry: Entry{Mode: 0o644, Size: 1}})
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pack := func(dirs *dirRoots) ([]byte, []string) {
		var out bytes.Buffer
		tw := tar.NewWriter(&out)
		var errs []string
		for _, c := range changes {
			if err := writeEntry(tw, r, dirs, c, nil); err != nil {
				errs = append(errs, c.Path)
				// A refused entry stops the real patch (WritePatch);
				// here the next entries are packed on a new writer.
				tw = tar.NewWriter(&out)
			}
		}
		tw.Close()
		return out.Bytes(), errs
	}
	dirs := &dirRoots{base: r, m: map[string]*os.Root{}}
	defer dirs.close()
	got, gotErrs := pack(dirs)
	want, wantErrs := pack(nil)
	if strings.Join(gotErrs, ",") != strings.Join(wantErrs, ",") {
		t.Errorf("refused %v, through the root %v", gotErrs, wantErrs)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the patches differ: %d bytes by descriptor, %d through the root", len(got), len(want))
	}
	if len(dirs.fds) == 0 {
		t.Error("no directory was opened by descriptor: packFileAt was not used")
	}
	// And what the patch says of each.
	deleted := map[string]bool{}
	err = ReadPatch(bytes.NewReader(got), DefaultLimits, func(it *Item) error {
		if it.Deleted {
			deleted[it.Path] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"gone.go", "a/gone/too.go", "swapped/to-dir"} {
		if !deleted[p] {
			t.Errorf("%s: not sent as deleted", p)
		}
	}
}
