package sync

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWatchedSameTickRewrite: a file rewritten with the same size right
// after a watched scan, within the same clock tick (mtime, ctime, size and
// inode all as that scan saw them), is still reported: the event names it,
// its stat says nothing, and the hash of a racy file decides. Linux since
// 6.13 gives a file a fine-grained timestamp once its old one was read (so
// a scan's stat and a later write never share one here); the stat reports
// the scan's timestamps instead, as a coarse-clock file system would.
func TestWatchedSameTickRewrite(t *testing.T) {
	root := t.TempDir()
	ex := mustMatcher(DefaultExcludes)
	w := NewWatch(root, ex)
	defer w.Close()
	m := Manifest{}
	sc := &Scanner{Exclude: ex}
	if _, _, err := sc.Update(root, m, w); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "f")
	if err := os.WriteFile(p, []byte("aaaa"), 0o644); err != nil {
		t.Fatal(err)
	}
	inc0 := incrementalScans.Load()
	if _, _, err := sc.Update(root, m, w); err != nil {
		t.Fatal(err)
	}
	if incrementalScans.Load() == inc0 {
		t.Fatal("a full scan, not the events")
	}
	seen := m["f"]
	defer func() { statPathFunc = statPath }()
	statPathFunc = func(full string) (Entry, bool, error) {
		e, ok, err := statPath(full)
		if full == p && ok {
			e.MTime, e.CTime = seen.MTime, seen.CTime // one tick
		}
		return e, ok, err
	}
	if err := os.WriteFile(p, []byte("bbbb"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, _, err := sc.Update(root, m, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch) != 1 || ch[0].Path != "f" || m["f"].Hash == seen.Hash {
		t.Fatalf("a same-size rewrite within one tick of the scan was missed: changes %+v, entry %+v, before %+v", ch, m["f"], seen)
	}
}
