package sync

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// TestFreshTreeNotHashedAtEveryScan: a tree written a moment before its
// session starts (a clone) is not read whole by every scan of the next two
// seconds. On a file system with fine timestamps a file is racy for
// fineRacyWindow only: its files, written 300 ms before, are neither hashed
// by the first scan nor by the next (before, every scan within racyWindow
// of their mtime read them all). One written just now is hashed. A file
// whose mtime was set by hand (here to a whole second, which alone would
// make it racy for racyWindow) has a ctime apart from it there: no later
// write can leave both as they are (racyRule.entry), so it is not read
// either, and a same-size rewrite of it is still seen.
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
			want := p == "now"
			if (e.Hash != "") != want {
				t.Fatalf("entry %s: hash %q; want one only for the just-written file", p, e.Hash)
			}
		}
	}
	if read1 != 1 || read2 != 1 {
		t.Fatalf("the two scans read %d and %d files; want only the one still racy each time, not the %d written 300 ms before nor the one whose mtime was set", read1, read2, n)
	}
	// The file whose mtime was set, rewritten at the same size: the write
	// moves its mtime (and ctime) to now.
	prev := m2["whole"]
	os.WriteFile(whole, []byte("WHOLE"), 0o644)
	m3, _ := scan(m2)
	if m3["whole"].Same(prev) {
		t.Fatalf("a same-size rewrite of a file whose mtime was set by hand was missed: %+v, before %+v", m3["whole"], prev)
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
	// A file's ctime decides with fine timestamps only: one apart from its
	// mtime is never racy there; one equal to it, or unknown (0), leaves
	// the mtime rule.
	recent := start.Add(-50 * time.Millisecond).UnixNano()
	fineCtime := fine
	fineCtime.ctimeShows = true
	coarseCtime := coarse // no ctimeShows: a file system without fine timestamps
	for _, c := range []struct {
		e            Entry
		fine, coarse bool
	}{
		{Entry{MTime: recent, CTime: recent}, true, true},
		{Entry{MTime: recent, CTime: recent + 1}, false, true},
		{Entry{MTime: recent, CTime: recent - 1}, false, true},
		{Entry{MTime: recent}, true, true},
		{Entry{MTime: start.Add(time.Second).UnixNano(), CTime: recent}, false, true},
		{Entry{MTime: time.Unix(1_000_000, 0).UnixNano(), CTime: recent}, false, true},
		{Entry{MTime: time.Unix(1_000_000, 0).UnixNano(), CTime: time.Unix(1_000_000, 0).UnixNano()}, true, true},
		{Entry{MTime: start.Add(-3 * time.Second).UnixNano(), CTime: start.Add(-3 * time.Second).UnixNano()}, false, false},
	} {
		if got := fineCtime.entry(c.e); got != c.fine {
			t.Errorf("fine timestamps, %+v: racy %v, want %v", c.e, got, c.fine)
		}
		if got := coarseCtime.entry(c.e); got != c.coarse {
			t.Errorf("without fine timestamps, %+v: racy %v, want %v", c.e, got, c.coarse)
		}
	}
	if r := racyFor(t.TempDir(), start); !r.ctimeShows {
		t.Error("racyFor on the test's temporary dir (ext4, tmpfs, XFS or Btrfs) does not let the ctime decide")
	}
	if fineTimestamps("/proc") {
		t.Error("/proc taken for a file system with fine timestamps")
	}
	if fineTimestamps(filepath.Join(t.TempDir(), "missing")) {
		t.Error("a path that cannot be stat'ed taken for fine timestamps")
	}
}

// TestPushedRecentFilesNotReadAgain: files the host edited a moment ago
// (racy there: their mtime is its ctime) are pushed; in the sandbox the
// helper writes them with the host's mtime, so their ctime is apart from
// it, and neither the helper's scan after the command nor a later one
// reads them to hash (each read all of them twice: once as racy, once to
// verify the hash when settled). A same-size rewrite by the command within
// the tick of that write is still seen: the write moves the mtime to its
// own tick, which the faked stat gives to both times (as a coarse clock
// would, with the ctime unchanged).
func TestPushedRecentFilesNotReadAgain(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(map[bool]string{false: "unwatched", true: "watched"}[watched], func(t *testing.T) {
			if watched {
				WatchHelper = true
				defer func() { WatchHelper = false }()
			}
			p := newPair(t)
			if watched {
				p.h.Watch(nil)
				defer p.h.Close()
			}
			const n = 40
			old := time.Now().Add(-time.Hour)
			name := func(i int) string { return filepath.Join("d", strconv.Itoa(i)+".go") }
			for i := range n {
				put(t, filepath.Join(p.host, name(i)), "one")
				os.Chtimes(filepath.Join(p.host, name(i)), old, old)
			}
			p.sync(nil)
			p.sync(nil)
			var last time.Time
			for i := range n {
				put(t, filepath.Join(p.host, name(i)), "two") // now: racy on the host
				if fi, err := os.Stat(filepath.Join(p.host, name(i))); err == nil && fi.ModTime().After(last) {
					last = fi.ModTime()
				}
			}
			// The helper's writes come a tick of the clock later than the
			// host's (else a copy's ctime may be its mtime to the
			// nanosecond, and racy: hashed, rightly): a file written now
			// shows a later time.
			probe := filepath.Join(t.TempDir(), "probe")
			ticked := testenv.WaitEvery(2*time.Second, time.Millisecond, func() bool {
				os.WriteFile(probe, nil, 0o644)
				fi, err := os.Stat(probe)
				return err == nil && fi.ModTime().After(last)
			})
			if !ticked {
				t.Fatal("the clock did not move past the host's writes in 2 s")
			}
			sandboxHashes := int64(0)
			rep := p.sync(func() {
				// What the helper's Collect reads is counted from here.
				sandboxHashes = -hashedFiles.Load()
			})
			sandboxHashes += hashedFiles.Load()
			if rep.Pushed != n {
				t.Fatalf("pushed %d, want %d", rep.Pushed, n)
			}
			if sandboxHashes != 0 {
				t.Errorf("the helper's scan after the push read %d of the %d files it had just written", sandboxHashes, n)
			}
			before := hashedFiles.Load()
			p.sync(nil)
			// The host's own edits are read once more there when they
			// settle (their hash was taken while racy); the sandbox's
			// copies are not.
			if got := hashedFiles.Load() - before; got > n {
				t.Errorf("the next round read %d files, want at most the host's %d", got, n)
			}
			// A same-size rewrite of one of them in the sandbox, within the
			// tick of the helper's write: both times of the new stat are
			// that write's ctime.
			f := filepath.Join(p.sandbox, name(0))
			fi, err := os.Lstat(f)
			if err != nil {
				t.Fatal(err)
			}
			tick, _ := statIDs(fi)
			defer func() { statPathFunc = nil }()
			statPathFunc = func(full string) (Entry, bool, error) {
				e, ok, err := statPath(full)
				if full == f && ok {
					e.MTime, e.CTime = tick, tick
				}
				return e, ok, err
			}
			p.sync(func() {
				put(t, f, "TWO")
			})
			if got := read(t, filepath.Join(p.host, name(0))); got != "TWO" {
				t.Fatalf("a same-size rewrite within the tick of the helper's write was missed: the host has %q", got)
			}
		})
	}
}
