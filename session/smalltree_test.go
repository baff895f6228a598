//go:build linux

package session

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// smallTree's counts against an independent walk, and its bounds at their
// edges: a tree of exactly the bound is small, one entry more is not, also
// when the entry over is in a second code dir.
func TestSmallTreeBounds(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for i := range 30 {
		d := filepath.Join(a, "d"+strconv.Itoa(i%4), "sub")
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)), make([]byte, 100*i), 0o644)
	}
	os.Symlink("d0", filepath.Join(a, "link"))
	os.WriteFile(filepath.Join(b, "only"), []byte("x"), 0o644)
	oracle := func(dir string) (n int) {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if p != dir {
				n++
			}
			return nil
		})
		return n
	}
	na, nb := oracle(a), oracle(b)
	n, bytes, small, _ := smallTree([]string{a, b}, na+nb, 1<<30)
	if !small || n != na+nb {
		t.Fatalf("a tree of %d entries under a bound of as many: small %v, counted %d", na+nb, small, n)
	}
	// Each regular file holds at least its length.
	if min := int64(100 * 29 * 30 / 2); bytes < min {
		t.Fatalf("counted %d bytes, fewer than the files' %d", bytes, min)
	}
	if _, _, small, _ := smallTree([]string{a, b}, na+nb-1, 1<<30); small {
		t.Fatal("one entry over the bound (in the second code dir) was taken for small")
	}
	if _, _, small, _ := smallTree([]string{a}, na-1, 1<<30); small {
		t.Fatal("one entry over the bound was taken for small")
	}
	if _, _, small, _ := smallTree([]string{a, b}, na+nb, bytes-1); small {
		t.Fatal("one byte over the bound was taken for small")
	}
	if _, _, small, _ := smallTree([]string{a, b}, na+nb, bytes); !small {
		t.Fatal("a tree of exactly the byte bound was not small")
	}
	if _, _, small, _ := smallTree([]string{filepath.Join(a, "missing"), b}, na+nb, 1<<30); !small {
		t.Fatal("a code dir that does not exist (yet) made the tree not small")
	}
}
