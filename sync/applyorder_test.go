package sync

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyFileThenBelowIt: a push naming a file and then a file below it
// (no host sends it; the helper must still apply it in order, the first
// write done before the second looks at its parent): the first is moved
// aside as the sandbox's, never lost, and the manifest is what is on disk.
func TestApplyFileThenBelowIt(t *testing.T) {
	for range 20 {
		p := newPair(t)
		put(t, filepath.Join(p.host, "keep.txt"), "k\n")
		p.sync(nil)
		os.MkdirAll(p.hstate+"-host", 0o700)
		r, _, err := p.h.Begin()
		if err != nil {
			t.Fatal(err)
		}
		helper := p.helper(r)
		push := mkTar(t, tfile("a", "A\n"), tfile("a/b", "B\n"))
		if err := helper.Apply(bytes.NewReader(push)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, filepath.Join(p.sandbox, "a/b")); got != "B\n" {
			t.Fatalf("a/b: %q", got)
		}
		aside := ""
		ents, _ := os.ReadDir(p.sandbox)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "a"+ConflictSuffix) {
				aside = read(t, filepath.Join(p.sandbox, e.Name()))
			}
		}
		if aside != "A\n" {
			t.Fatalf("the first a is not kept aside: %q (%v)", aside, ents)
		}
		for q, e := range helper.dirs[0].state.Manifest {
			if q == "a" {
				// The manifest keeps the pushed a, now aside (as before
				// the workers): the next scan finds a directory there.
				continue
			}
			fi, err := os.Lstat(filepath.Join(p.sandbox, q))
			if err != nil {
				t.Fatalf("%s in the manifest, not on disk: %v", q, err)
			}
			if d, _ := entryOf(fi); !sameIgnoringHash(d, e) {
				t.Fatalf("%s: manifest %+v, disk %+v", q, e, d)
			}
		}
	}
}
