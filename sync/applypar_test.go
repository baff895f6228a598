package sync

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyCutShortKeepsManifestTrue: a push that ends in the middle (the
// host died) fails Apply after some of its files were written, by the
// workers too (applypar.go). What the helper's manifest then holds for
// each pushed file is what is on disk: a file written is recorded, one not
// written keeps its old entry, and no temporary file is left behind.
func TestApplyCutShortKeepsManifestTrue(t *testing.T) {
	p := newPair(t)
	const n = 400
	name := func(i int) string { return fmt.Sprintf("d%02d/f%03d.txt", i%7, i) }
	for i := range n {
		put(t, filepath.Join(p.host, name(i)), "old "+name(i)+"\n")
	}
	p.sync(nil)
	for i := range n {
		put(t, filepath.Join(p.host, name(i)), "new "+name(i)+" "+strings.Repeat("x", i)+"\n")
	}
	os.MkdirAll(p.hstate+"-host", 0o700)
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	helper := p.helper(r)
	var push bytes.Buffer
	if err := r.WritePush(&push); err != nil {
		t.Fatal(err)
	}
	cut := push.Bytes()[:push.Len()/2]
	if err := helper.Apply(bytes.NewReader(cut)); err == nil {
		t.Fatal("a push cut in half applied without an error")
	}
	m := helper.dirs[0].state.Manifest
	written := 0
	for i := range n {
		fi, err := os.Lstat(filepath.Join(p.sandbox, name(i)))
		if err != nil {
			t.Fatalf("%s: %v", name(i), err)
		}
		disk, _ := entryOf(fi)
		if got := m[name(i)]; !sameIgnoringHash(got, disk) {
			t.Errorf("%s: the manifest has %+v, the disk %+v", name(i), got, disk)
		}
		if strings.HasPrefix(read(t, filepath.Join(p.sandbox, name(i))), "new ") {
			written++
		}
	}
	if written == 0 || written == n {
		t.Fatalf("%d of %d files written: the cut is not in the middle of the push", written, n)
	}
	filepath.WalkDir(p.sandbox, func(q string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".sbx-tmp-") {
			t.Errorf("temporary file left: %s", q)
		}
		return nil
	})
}
