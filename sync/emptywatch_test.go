package sync

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWatchedEmptyCodeDirNotRescanned: a synced code dir that is empty
// keeps its watch from round trip to round trip, as any other does: a
// round trip of an empty manifest is not a new sandbox's first one, whose
// rescan makes the watch anew (every no-change command on an empty code
// dir closed and opened an inotify instance, milliseconds of the kernel's
// each). What the host adds later still comes by events.
func TestWatchedEmptyCodeDirNotRescanned(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	p := newPair(t)
	p.h.Reset() // a new sandbox, as a claim does
	p.h.Watch(nil)
	defer p.h.Close()
	p.sync(nil)
	p.sync(nil)
	full0, inc0 := fullScans.Load(), incrementalScans.Load()
	for range 5 {
		p.sync(nil)
	}
	if full, inc := fullScans.Load()-full0, incrementalScans.Load()-inc0; full != 0 || inc == 0 {
		w := p.h.dirs[0].watch
		t.Fatalf("5 no-change round trips of an empty code dir: %d full scans (want none), %d from events (the host's watch: off %q, next full %q, inotify instance %v)", full, inc, w.off, w.full, w.n != nil)
	}
	put(t, filepath.Join(p.host, "new.txt"), "x")
	if rep := p.sync(nil); rep.Pushed != 1 || read(t, filepath.Join(p.sandbox, "new.txt")) != "x" {
		t.Fatalf("a file added to the empty code dir: pushed %d", rep.Pushed)
	}
	os.Remove(filepath.Join(p.host, "new.txt"))
	p.sync(nil)
	if _, err := os.Lstat(filepath.Join(p.sandbox, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("its removal did not reach the sandbox: %v", err)
	}
	if full := fullScans.Load() - full0; full != 0 {
		t.Fatalf("%d full scans in all, want none", full)
	}
}
