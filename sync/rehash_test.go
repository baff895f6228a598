package sync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file hashed once is not read again by every later scan: a hash taken
// while the file was racy is read once more when it has settled, and from
// then on carried over as long as its stat (size, mtime, inode, ctime) is
// unchanged. A same-size rewrite with the mtime put back still shows (its
// ctime moves), and so does one that keeps even the ctime's tick, since the
// hash is read again then.
func TestHashNotReadAgainOnceSettled(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f")
	if err := os.WriteFile(p, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	scan := countingScan(t, root)

	// The last sync hashed it while it was racy.
	m0, _ := scan(nil)
	racyHash, _ := hashFile(p)
	e := m0["f"]
	e.Hash, e.Verified = racyHash, false
	m0["f"] = e

	m1, n := scan(m0)
	if n != 1 || m1["f"].Hash != racyHash || !m1["f"].Verified {
		t.Fatalf("settled scan after a racy hash: read %d files, entry %+v; want it read once and verified", n, m1["f"])
	}
	for i := range 3 {
		m2, n := scan(m1)
		if n != 0 {
			t.Fatalf("scan %d after the file settled read %d files; want the verified hash carried over", i+2, n)
		}
		if m2["f"].Hash != racyHash || !m2["f"].Same(m1["f"]) {
			t.Fatalf("carried entry %+v differs from %+v", m2["f"], m1["f"])
		}
		m1 = m2
	}

	// Same size, mtime put back: the ctime tells, the file is read again
	// and the new content's hash differs.
	if err := os.WriteFile(p, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, old, old)
	m3, n := scan(m1)
	if n != 1 || m3["f"].Same(m1["f"]) {
		t.Fatalf("a same-size rewrite with its mtime put back: read %d, same %v", n, m3["f"].Same(m1["f"]))
	}

	// A file with no hash stays unread while its stat is unchanged.
	q := filepath.Join(root, "g")
	os.WriteFile(q, []byte("g\n"), 0o644)
	os.Chtimes(q, old, old)
	m4, _ := scan(m3)
	if _, n := scan(m4); n != 0 {
		t.Fatalf("an unchanged unhashed file was read: %d", n)
	}
}

// countingScan scans root with a Scanner of its own against prev and says
// how many files the scan read to hash.
func countingScan(t *testing.T, root string) func(prev Manifest) (Manifest, int64) {
	sc := &Scanner{}
	return func(prev Manifest) (Manifest, int64) {
		t.Helper()
		before := hashedFiles.Load()
		m, err := sc.Scan(root, prev)
		if err != nil {
			t.Fatal(err)
		}
		return m, hashedFiles.Load() - before
	}
}
