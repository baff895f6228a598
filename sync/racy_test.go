package sync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFreshTreeNotHashedAtEveryScan: a tree written a moment before its
// session starts (a clone) is not read whole by every scan of the next two
// seconds. On a file system with fine timestamps a file is racy for
// fineRacyWindow only: its files, written 300 ms before, are neither hashed
// by the first scan nor by the next (before, every scan within racyWindow
// of their mtime read them all). A file whose mtime is a whole second (a
// file system that keeps seconds, or a time set by hand) stays racy for
// racyWindow and is hashed, as is one written just now; a same-size
// rewrite of it within the tick is still seen.
func TestFreshTreeNotHashedAtEveryScan(t *testing.T) {
	root := t.TempDir()
	if !fineTimestamps(root) {
		t.Fatalf("the test's temporary dir %s is not on ext4, tmpfs, XFS or Btrfs: point TMPDIR at one", root)
	}
	// Past the fine window, well within racyWindow, with a sub-second part.
	written := time.Now().Add(-300 * time.Millisecond).Truncate(time.Millisecond).Add(123456)
	const n = 50
	for i := range n {
		p := filepath.Join(root, "f"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := os.WriteFile(p, []byte("content"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, written, written); err != nil {
			t.Fatal(err)
		}
	}
	whole := filepath.Join(root, "whole")
	os.WriteFile(whole, []byte("whole"), 0o644)
	ws := time.Now().Add(-300 * time.Millisecond).Truncate(time.Second)
	if err := os.Chtimes(whole, ws, ws); err != nil {
		t.Fatal(err)
	}
	now := filepath.Join(root, "now")
	os.WriteFile(now, []byte("now"), 0o644)

	scan := countingScan(t, root)
	m1, read1 := scan(nil)
	m2, read2 := scan(m1)
	if time.Since(written) >= racyWindow {
		t.Fatalf("the scans took past racyWindow (%v): the test proves nothing on a machine this slow", time.Since(written))
	}
	for _, m := range []Manifest{m1, m2} {
		for p, e := range m {
			want := p == "whole" || p == "now"
			if (e.Hash != "") != want {
				t.Fatalf("entry %s: hash %q; want one only for the whole-second and the just-written file", p, e.Hash)
			}
		}
	}
	if read1 != 2 || read2 != 2 {
		t.Fatalf("the two scans read %d and %d files; want only the 2 still racy each time, not the %d written 300 ms before", read1, read2, n)
	}
	// The whole-second file, rewritten at the same size with its mtime
	// and (as a coarse clock would) its ctime unchanged: its hash shows it.
	prev := m2["whole"]
	os.WriteFile(whole, []byte("WHOLE"), 0o644)
	os.Chtimes(whole, ws, ws)
	m3, _ := scan(m2)
	e := m3["whole"]
	e.CTime, e.Ino = prev.CTime, prev.Ino
	if e.Same(prev) {
		t.Fatalf("a same-size rewrite of a whole-second file within racyWindow was missed: %+v, before %+v", m3["whole"], prev)
	}
}

// TestRacyRule: which mtimes each window takes for racy.
func TestRacyRule(t *testing.T) {
	start := time.Unix(1_000_000, 500_000_000)
	fine := racyRule{coarse: start.Add(-racyWindow).UnixNano(), fine: start.Add(-fineRacyWindow).UnixNano()}
	coarse := racyRule{coarse: fine.coarse, fine: fine.coarse}
	for _, c := range []struct {
		mtime        time.Time
		fine, coarse bool
	}{
		{start, true, true},
		{start.Add(time.Second), true, true}, // in the future (a pull can carry any mtime): always racy
		{time.Unix(1_000_003, 0), true, true},
		{start.Add(-50 * time.Millisecond), true, true},
		{start.Add(-150 * time.Millisecond), false, true},
		{start.Add(-1900 * time.Millisecond), false, true},
		{start.Add(-2100 * time.Millisecond), false, false},
		{time.Unix(1_000_000, 0), true, true}, // a whole second: racyWindow either way
		{time.Unix(999_998, 0), false, false},
		{time.Unix(999_999, 0), true, true},
	} {
		if got := fine.racy(c.mtime.UnixNano()); got != c.fine {
			t.Errorf("fine rule, mtime %v before the start: racy %v, want %v", start.Sub(c.mtime), got, c.fine)
		}
		if got := coarse.racy(c.mtime.UnixNano()); got != c.coarse {
			t.Errorf("coarse rule, mtime %v before the start: racy %v, want %v", start.Sub(c.mtime), got, c.coarse)
		}
	}
	if fineTimestamps("/proc") {
		t.Error("/proc taken for a file system with fine timestamps")
	}
	if fineTimestamps(filepath.Join(t.TempDir(), "missing")) {
		t.Error("a path that cannot be stat'ed taken for fine timestamps")
	}
}
