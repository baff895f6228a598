package sync

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	defer func() { statPathFunc = nil }()
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

// TestVerifyFindsMissedEvents: the verification scan reports nothing while
// the watches kept up (a change whose event waits for the next round trip
// included), names a change whose event was lost, and makes the next round
// trip a full scan that sends it; a round trip during it voids it.
func TestVerifyFindsMissedEvents(t *testing.T) {
	p := newPair(t)
	p.h.Watch(nil)
	defer p.h.Close()
	put(t, filepath.Join(p.host, "a"), "a")
	put(t, filepath.Join(p.host, "d", "b"), "b")
	old := time.Now().Add(-time.Hour) // settled: no file is re-read each round
	os.Chtimes(filepath.Join(p.host, "a"), old, old)
	os.Chtimes(filepath.Join(p.host, "d", "b"), old, old)
	p.sync(nil)
	p.sync(nil)
	verify := func() (int, []string) {
		t.Helper()
		v := p.h.BeginVerify()
		if v == nil {
			t.Fatal("no watched code dir to verify")
		}
		if err := v.Scan(); err != nil {
			t.Fatal(err)
		}
		missed, n := v.Finish(nil)
		return n, missed
	}
	if n, missed := verify(); n != 0 {
		t.Fatalf("in step, the verification found %d: %v", n, missed)
	}
	put(t, filepath.Join(p.host, "d", "b"), "bb")
	if n, missed := verify(); n != 0 {
		t.Fatalf("a change whose event waits was taken for a missed one: %d %v", n, missed)
	}
	p.h.dirs[0].watch.n.take() // its event lost, as an overflowing kernel would
	n, missed := verify()
	if n != 1 || len(missed) != 1 || missed[0] != filepath.Join(p.host, "d", "b") {
		t.Fatalf("a change whose event was lost: verification found %d %v, want d/b", n, missed)
	}
	p.sync(nil)
	if got := read(t, filepath.Join(p.sandbox, "d", "b")); got != "bb" {
		t.Fatalf("after the verification the sandbox has %q, want the host's bb", got)
	}
	v := p.h.BeginVerify()
	v.Scan()
	put(t, filepath.Join(p.host, "c"), "c")
	p.h.dirs[0].watch.n.take()
	p.sync(nil) // a round trip meanwhile
	if _, n := v.Finish(nil); n != 0 {
		t.Fatalf("a verification a round trip overtook reported %d", n)
	}
}

// TestVerifyLiveFindsMissedEvents is TestVerifyFindsMissedEvents for the
// sandbox side: the states a long-lived helper process keeps in memory.
func TestVerifyLiveFindsMissedEvents(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	p := newPair(t)
	put(t, filepath.Join(p.host, "d", "b"), "b")
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(p.host, "d", "b"), old, old)
	p.sync(nil)
	p.sync(nil)
	os.Chtimes(filepath.Join(p.sandbox, "d", "b"), old, old)
	p.sync(nil) // the sandbox's copy settled too
	if n := VerifyLive(nil); n != 0 {
		t.Fatalf("in step, the verification found %d", n)
	}
	p.sync(nil) // a verified state is verified again after a round trip
	put(t, filepath.Join(p.sandbox, "d", "b"), "sandbox")
	w := helperWatch(p)
	if w == nil {
		t.Fatal("the helper keeps no watch")
	}
	w.n.take() // its event lost
	if n := VerifyLive(nil); n != 1 {
		t.Fatalf("a sandbox change whose event was lost: the verification found %d, want 1", n)
	}
	p.sync(nil)
	if got := read(t, filepath.Join(p.host, "d", "b")); got != "sandbox" {
		t.Fatalf("after the verification the host has %q, want the sandbox's edit", got)
	}
}

// TestWatchBounds: a tree past the watch bound is scanned in full from
// then on, and a round whose events name more paths than their bound is a
// full scan; both still find every change.
func TestWatchBounds(t *testing.T) {
	ex := mustMatcher(DefaultExcludes)
	sc := &Scanner{Exclude: ex}
	changed := func(ch []Change) map[string]bool {
		out := map[string]bool{}
		for _, c := range ch {
			out[c.Path] = true
		}
		return out
	}

	defer func(n int) { maxWatches = n }(maxWatches)
	maxWatches = 3
	root := t.TempDir()
	for _, d := range []string{"a", "b", "c", "d"} {
		put(t, filepath.Join(root, d, "f"), "x")
	}
	w := NewWatch(root, ex)
	defer w.Close()
	m := Manifest{}
	if _, _, err := sc.Update(root, m, w); err != nil {
		t.Fatal(err)
	}
	if w.off == "" {
		t.Fatal("a tree of 5 directories watched under a bound of 3")
	}
	put(t, filepath.Join(root, "d", "f"), "y!")
	full0 := fullScans.Load()
	ch, _, err := sc.Update(root, m, w)
	if err != nil {
		t.Fatal(err)
	}
	if fullScans.Load() == full0 || !changed(ch)["d/f"] {
		t.Fatalf("past the watch bound: full scan %v, changes %+v", fullScans.Load() != full0, ch)
	}
	maxWatches = 65536

	defer func(n int) { maxTouched = n }(maxTouched)
	maxTouched = 2
	root = t.TempDir()
	w2 := NewWatch(root, ex)
	defer w2.Close()
	m = Manifest{}
	if _, _, err := sc.Update(root, m, w2); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"p", "q", "r", "s"} {
		put(t, filepath.Join(root, n), n)
	}
	full0 = fullScans.Load()
	ch, _, err = sc.Update(root, m, w2)
	if err != nil {
		t.Fatal(err)
	}
	if got := changed(ch); fullScans.Load() == full0 || len(got) != 4 {
		t.Fatalf("4 paths over a bound of 2: full scan %v, changes %+v", fullScans.Load() != full0, ch)
	}
}

// TestFullScanNextSeesMmapWrites: inotify never reports a write through a
// shared mmap; the round trip after FullScanNext (the last pull-back before
// a release) scans both sides in full and brings it back.
func TestFullScanNextSeesMmapWrites(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	p := newPair(t)
	p.h.Watch(nil)
	defer p.h.Close()
	put(t, filepath.Join(p.host, "db"), "aaaaaaaa")
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(p.host, "db"), old, old)
	p.sync(nil)
	os.Chtimes(filepath.Join(p.sandbox, "db"), old, old)
	p.sync(nil)
	p.sync(nil)
	f, err := os.OpenFile(filepath.Join(p.sandbox, "db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "bbbbbbbb")
	unix.Munmap(mem)
	f.Close()
	p.sync(nil)
	t.Logf("after an incremental round trip the host has %q", read(t, filepath.Join(p.host, "db")))
	p.h.FullScanNext()
	p.sync(nil)
	if got := read(t, filepath.Join(p.host, "db")); got != "bbbbbbbb" {
		t.Fatalf("a write through mmap, after a full scan: the host has %q", got)
	}
}

// TestWatchAfterNoInotifyInstance: a watch that found no inotify instance
// free (the user's fs.inotify.max_user_instances reached by other
// programs: CI's packages at once took all 128) scans in full while none
// is, and watches again once one is: it used to give watching up for the
// session.
func TestWatchAfterNoInotifyInstance(t *testing.T) {
	defer func(was func(int) (int, error)) { inotifyInit1 = was }(inotifyInit1)
	fail := true
	inotifyInit1 = func(flags int) (int, error) {
		if fail {
			return -1, unix.EMFILE
		}
		return unix.InotifyInit1(flags)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	w := NewWatch(dir, mustMatcher(DefaultExcludes))
	defer w.Close()
	sc := &Scanner{Exclude: mustMatcher(DefaultExcludes)}
	m := Manifest{}
	for range 2 {
		full0 := fullScans.Load()
		if _, _, err := sc.Update(dir, m, w); err != nil {
			t.Fatal(err)
		}
		if fullScans.Load() == full0 || w.n != nil {
			t.Fatal("a scan without an inotify instance was not a full one")
		}
	}
	fail = false
	sc.Update(dir, m, w) // full: it makes the instance
	if w.n == nil || w.off != "" {
		t.Fatalf("no watch once an instance was free again (off: %q)", w.off)
	}
	os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644)
	inc0 := incrementalScans.Load()
	ch, _, err := sc.Update(dir, m, w)
	if err != nil || incrementalScans.Load() != inc0+1 || len(ch) != 1 || ch[0].Path != "b" {
		t.Fatalf("after the instance came back: changes %+v, %d incremental scans, err %v", ch, incrementalScans.Load()-inc0, err)
	}
}
