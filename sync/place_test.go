package sync

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// placeTree fills a host tree with what a first push must carry: modes
// (executable, read-only, a directory without write permission), a
// symlink, an empty directory and file, a file larger than one copy
// call's buffer, old and recent mtimes, and what must never enter: an
// .sbxignore'd secret and a default exclude.
func placeTree(t *testing.T, root string) {
	t.Helper()
	put(t, filepath.Join(root, "a.txt"), "alpha\n")
	put(t, filepath.Join(root, "bin/run.sh"), "#!/bin/sh\necho run\n")
	os.Chmod(filepath.Join(root, "bin/run.sh"), 0o755)
	put(t, filepath.Join(root, "ro.txt"), "read only\n")
	os.Chmod(filepath.Join(root, "ro.txt"), 0o444)
	put(t, filepath.Join(root, "group.txt"), "group-writable: more than the umask lets a create make\n")
	os.Chmod(filepath.Join(root, "group.txt"), 0o664)
	put(t, filepath.Join(root, "locked/inside.txt"), "in a 0555 dir\n")
	put(t, filepath.Join(root, "deep/x/y/z.txt"), "deep\n")
	put(t, filepath.Join(root, "empty.txt"), "")
	os.MkdirAll(filepath.Join(root, "emptydir"), 0o750)
	os.Symlink("a.txt", filepath.Join(root, "link"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16+7) // over 256 KiB, not a multiple of it
	os.WriteFile(filepath.Join(root, "big.bin"), big, 0o600)
	put(t, filepath.Join(root, ".sbxignore"), "secret.env\n")
	put(t, filepath.Join(root, "secret.env"), "TOKEN=never-in-the-sandbox\n")
	put(t, filepath.Join(root, "node_modules/.cache/junk"), "cache\n")
	old := time.Now().Add(-time.Hour)
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !strings.HasSuffix(p, "a.txt") {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	os.Chmod(filepath.Join(root, "locked"), 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked"), 0o755) })
}

// TestPlaceFirstPush: a new sandbox's first push written straight into its
// workspace holds what the streamed one would (contents, modes, mtimes,
// links, empty directories), nothing excluded, and the sync goes on from
// there both ways; on Linux with the system calls themselves (with and
// without the helper watching) and the portable way (os.Root).
func TestPlaceFirstPush(t *testing.T) {
	for _, mode := range []string{"unwatched", "watched", "portable", "sendfile", "readwrite"} {
		t.Run(mode, func(t *testing.T) {
			WatchHelper = mode == "watched"
			placeFast = mode != "portable"
			// The copy's later ways, as across file systems (ext4 to a
			// tmpfs workspace: no copy_file_range) or where neither call
			// works.
			placeCopyFrom = map[string]int{"sendfile": 1, "readwrite": 2}[mode]
			defer func() { WatchHelper, placeFast, placeCopyFrom = false, true, 0 }()
			p := newPair(t)
			p.place = true
			placeTree(t, p.host)
			p.open() // reads the tree's .sbxignore
			p.ignore = map[string]bool{"secret.env": true}
			t.Cleanup(func() { os.Chmod(filepath.Join(p.sandbox, "locked"), 0o755) })
			rep := p.sync(nil)
			if p.placeErr != nil {
				t.Fatalf("place: %v", p.placeErr)
			}
			if rep.Pushed == 0 || rep.Applied != 0 {
				t.Fatalf("report %+v: want the tree pushed and nothing back", rep)
			}
			p.same()
			for _, f := range []string{"secret.env", "node_modules/.cache/junk"} {
				if _, err := os.Lstat(filepath.Join(p.sandbox, f)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s entered the sandbox: %v", f, err)
				}
			}
			for _, f := range []string{"a.txt", "bin/run.sh", "ro.txt", "group.txt", "big.bin", "empty.txt", "locked/inside.txt", "deep/x/y/z.txt"} {
				h, _ := os.Lstat(filepath.Join(p.host, f))
				s, err := os.Lstat(filepath.Join(p.sandbox, f))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if !h.ModTime().Equal(s.ModTime()) || h.Mode() != s.Mode() || h.Size() != s.Size() {
					t.Errorf("%s: host %v %v %d, sandbox %v %v %d", f, h.Mode(), h.ModTime(), h.Size(), s.Mode(), s.ModTime(), s.Size())
				}
			}
			for _, d := range []string{"locked", "emptydir"} {
				h, _ := os.Lstat(filepath.Join(p.host, d))
				s, err := os.Lstat(filepath.Join(p.sandbox, d))
				if err != nil || h.Mode() != s.Mode() {
					t.Errorf("%s: host %v, sandbox %v (%v)", d, h.Mode(), s, err)
				}
			}
			// Nothing came back, and nothing comes back from a quiet
			// round: the helper's manifest is the placed tree.
			if rep := p.sync(nil); rep.Applied != 0 || rep.Pushed != 0 {
				t.Fatalf("quiet round after the placed push: %+v", rep)
			}
			// Then changes travel both ways as after a streamed push.
			rep = p.sync(func() {
				put(t, filepath.Join(p.sandbox, "a.txt"), "sandbox edit\n")
				put(t, filepath.Join(p.sandbox, "deep/new.txt"), "made in the sandbox\n")
			})
			if rep.Applied != 2 {
				t.Fatalf("want the sandbox's 2 changes back, report %+v", rep)
			}
			put(t, filepath.Join(p.host, "bin/run.sh"), "#!/bin/sh\necho host edit\n")
			p.sync(nil)
			p.same()
			if got := read(t, filepath.Join(p.sandbox, "bin/run.sh")); !strings.Contains(got, "host edit") {
				t.Fatalf("the host's edit did not reach the sandbox: %q", got)
			}
		})
	}
}

// TestPlaceRefusesWorkspaceNotEmpty: anything already in the workspace (a
// symlink out of it, planted) stops the placing before it writes: nothing
// reaches the link's target, and the push streams instead.
func TestPlaceRefusesWorkspaceNotEmpty(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "deep/x.txt"), "x\n")
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(p.sandbox, "deep"))
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	err = r.Place(0, p.sandbox)
	if !errors.Is(err, ErrNotPlaceable) {
		t.Fatalf("Place into a workspace holding a symlink: %v, want ErrNotPlaceable", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the placing wrote through the planted link: %v", ents)
	}
	if r.Request.Dirs[0].Placed != 0 {
		t.Fatalf("a refused Place still told the helper %d entries were placed", r.Request.Dirs[0].Placed)
	}
	var push bytes.Buffer
	if err := r.WritePush(&push); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(push.Bytes(), []byte("deep/x.txt")) {
		t.Fatal("the push does not stream the tree after a refused Place")
	}
}

// TestPlaceOnlyFirstRound: a round that is not the sandbox side's first
// (a workspace the sandbox has run in) is never placed.
func TestPlaceOnlyFirstRound(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "a.txt"), "a\n")
	p.sync(nil)
	put(t, filepath.Join(p.host, "b.txt"), "b\n")
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	if err := r.Place(0, empty); !errors.Is(err, ErrNotPlaceable) {
		t.Fatalf("Place of a later round: %v, want ErrNotPlaceable", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("a later round placed %v", ents)
	}
}

// TestPlaceHostSwappedAfterScan: a host directory or file replaced by a
// symlink between the scan and the placing is not read through: neither an
// excluded directory of the tree nor a file outside it enters the
// sandbox, and the helper's count still matches what was placed.
func TestPlaceHostSwappedAfterScan(t *testing.T) {
	p := newPair(t)
	p.place = true
	put(t, filepath.Join(p.host, "d/x.txt"), "plain\n")
	put(t, filepath.Join(p.host, "d/e/x.txt"), "plain\n")
	put(t, filepath.Join(p.host, "f.txt"), "plain f\n")
	put(t, filepath.Join(p.host, ".sbxignore"), "keys/\n")
	put(t, filepath.Join(p.host, "keys/x.txt"), "SECRET-IN-TREE\n")
	put(t, filepath.Join(p.host, "keys/e/x.txt"), "SECRET-IN-TREE\n")
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("SECRET-OUTSIDE\n"), 0o600)
	p.open() // reads the tree's .sbxignore
	p.beforePlace = func() {
		os.RemoveAll(filepath.Join(p.host, "d"))
		os.Symlink("keys", filepath.Join(p.host, "d"))
		os.Remove(filepath.Join(p.host, "f.txt"))
		os.Symlink(outside, filepath.Join(p.host, "f.txt"))
	}
	p.sync(nil)
	if p.placeErr != nil {
		t.Fatalf("place: %v", p.placeErr)
	}
	filepath.Walk(p.sandbox, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("SECRET")) {
				t.Errorf("%s in the sandbox holds %q", path, b)
			}
		}
		return nil
	})
	// The next round sends the links as the host has them now.
	p.sync(nil)
	if l, err := os.Readlink(filepath.Join(p.sandbox, "d")); err != nil || l != "keys" {
		t.Fatalf("d in the sandbox after the next round: %q %v", l, err)
	}
}

// TestPlacedPushChecked: the helper refuses a placed round whose workspace
// is not what the host placed (an entry more), a push that carries items
// for a placed dir, and a placed count without a reset.
func TestPlacedPushChecked(t *testing.T) {
	setup := func(t *testing.T) (*pair, *Round, HelperRequest) {
		p := newPair(t)
		put(t, filepath.Join(p.host, "a.txt"), "a\n")
		put(t, filepath.Join(p.host, "d/b.txt"), "b\n")
		r, _, err := p.h.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Place(0, p.sandbox); err != nil {
			t.Fatal(err)
		}
		req := r.Request
		req.StateDir = p.hstate
		req.Dirs = append([]HelperDir(nil), req.Dirs...)
		req.Dirs[0].Path = p.sandbox
		if req.Dirs[0].Placed != 3 {
			t.Fatalf("placed %d entries, want 3 (a.txt, d, d/b.txt)", req.Dirs[0].Placed)
		}
		return p, r, req
	}
	apply := func(req HelperRequest, push []byte) error {
		h, err := NewHelper(req)
		if err != nil {
			return err
		}
		return h.Apply(bytes.NewReader(push))
	}
	t.Run("entry planted after the placing", func(t *testing.T) {
		// Nothing of the sandbox runs between the placing and the
		// helper; were a file there all the same, it is not taken for
		// the host's: a full scan finds it the sandbox's own.
		p, r, req := setup(t)
		os.MkdirAll(p.hstate+"-host", 0o700)
		put(t, filepath.Join(p.sandbox, "d/planted"), "x")
		var push bytes.Buffer
		r.WritePush(&push)
		h, err := NewHelper(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Apply(bytes.NewReader(push.Bytes())); err != nil {
			t.Fatalf("apply: %v", err)
		}
		if _, ok := h.dirs[0].state.Manifest["d/planted"]; ok || len(h.dirs[0].state.Manifest) != 3 {
			t.Fatalf("the helper's manifest holds %d entries (planted: %v), want the 3 placed", len(h.dirs[0].state.Manifest), ok)
		}
		var pull bytes.Buffer
		reply := h.Collect(&pull)
		if err := r.ReadPull(&pull); err != nil {
			t.Fatal(err)
		}
		rep, err := r.Finish(reply)
		if err != nil {
			t.Fatal(err)
		}
		// This helper has no watch: its scan after the command is a
		// full one (a watching one's next full scan does the same).
		if rep.Applied != 1 || read(t, filepath.Join(p.host, "d/planted")) != "x" {
			t.Fatalf("the planted file after a full scan: %+v, host has %q", rep, read(t, filepath.Join(p.host, "d/planted")))
		}
	})
	t.Run("list short", func(t *testing.T) {
		_, r, req := setup(t)
		req.Dirs[0].Placed = 4
		var push bytes.Buffer
		r.WritePush(&push)
		if err := apply(req, push.Bytes()); err == nil || !strings.Contains(err.Error(), "takes 3") {
			t.Fatalf("apply of a placed list short of the count: %v", err)
		}
	})
	t.Run("items for a placed dir", func(t *testing.T) {
		p, _, req := setup(t)
		var push bytes.Buffer
		if err := WritePatch(&push, p.host, []Change{{Path: "a.txt", Entry: Entry{Mode: 0o644}}}); err != nil {
			t.Fatal(err)
		}
		if err := apply(req, push.Bytes()); err == nil || !strings.Contains(err.Error(), "placed") {
			t.Fatalf("apply of a push with items for a placed dir: %v", err)
		}
	})
	t.Run("no reset", func(t *testing.T) {
		_, r, req := setup(t)
		req.Dirs[0].Reset = false
		var push bytes.Buffer
		r.WritePush(&push)
		if err := apply(req, push.Bytes()); err == nil || !strings.Contains(err.Error(), "synced before") {
			t.Fatalf("apply of a placed push without a reset: %v", err)
		}
	})
}

// TestPlacedOwner: what is placed belongs to the workspace's owner (the
// sandbox's host uid when sbx runs as root), as if the sandbox had
// written it; run as another user, to that user.
func TestPlacedOwner(t *testing.T) {
	p := newPair(t)
	placeTree(t, p.host)
	t.Cleanup(func() { os.Chmod(filepath.Join(p.sandbox, "locked"), 0o755) })
	want := os.Geteuid()
	if want == 0 {
		want = 54321
		if err := os.Chown(p.sandbox, want, want); err != nil {
			t.Fatal(err)
		}
	}
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Place(0, p.sandbox); err != nil {
		t.Fatal(err)
	}
	n := 0
	filepath.Walk(p.sandbox, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != want || int(st.Gid) != want {
			t.Errorf("%s is owned by %d:%d, want %d", path, st.Uid, st.Gid, want)
		}
		return nil
	})
	if n < 10 {
		t.Fatalf("only %d entries placed", n)
	}
}

// TestUnfinishedFirstRoundPushesAgain: a watching host's first round (an
// empty manifest, filled by the scan without an undo of every path) that
// does not finish is forgotten: the next round pushes the whole tree again.
func TestUnfinishedFirstRoundPushesAgain(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "a.txt"), "a\n")
	put(t, filepath.Join(p.host, "d/b.txt"), "b\n")
	p.h.Watch(nil)
	defer p.h.Close()
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.changes[0]); n != 3 {
		t.Fatalf("first round pushes %d entries, want 3", n)
	}
	// No Finish: the sandbox never got them.
	r, _, err = p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.changes[0]); n != 3 {
		t.Fatalf("after an unfinished first round the next pushes %d entries, want 3", n)
	}
}

// TestPlacedStateSavedInBackground: a long-lived (watching) helper writes
// the manifest of a placed first push beside the first command, which does
// not wait for it (a 10k-file tree's state is ~700 KB of gob): Apply and
// Collect return while the write is held, and the file written then is
// the placed tree (a process that starts from it sends nothing back). One
// that dies before it is written starts from no state: its first round
// trip sends the whole tree back, which the host finds its own: nothing
// written on the host, no conflict.
func TestPlacedStateSavedInBackground(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	drop := func() { // the worker process ends: what it kept in memory is gone
		live.Lock()
		defer live.Unlock()
		for f, ls := range live.m {
			ls.watch.Close()
			delete(live.m, f)
		}
	}
	stateFiles := helperStateFiles
	for _, dies := range []bool{false, true} {
		t.Run(fmt.Sprint("dies=", dies), func(t *testing.T) {
			p := newPair(t)
			p.place = true
			agedTree(t, p.host, 200)
			r, helper, push := placedRound(t, p)
			hold := make(chan struct{})
			var died atomic.Bool
			beforeBackgroundSave = func() bool { <-hold; return !died.Load() }
			defer func() { beforeBackgroundSave = nil }()
			released := false
			unhold := func() {
				if !released {
					released = true
					close(hold)
				}
				WaitSaves()
			}
			defer unhold()
			if err := helper.Apply(push); err != nil {
				t.Fatal(err)
			}
			hostTimes := hostMTimes(p.host)
			if dies {
				// The command killed the worker before its state was
				// written: the write goes with it.
				drop()
				died.Store(true)
				unhold()
			} else {
				finishRound(t, r, helper) // returns with the write held
				if len(stateFiles(p)) != 0 {
					t.Fatalf("state written while held: %v", stateFiles(p))
				}
				unhold()
				drop()
				if len(stateFiles(p)) != 1 {
					t.Fatalf("no state written: %v", stateFiles(p))
				}
			}
			beforeBackgroundSave = nil
			rep := quietRoundAfter(t, p, hostTimes) // a new worker: from the file, or from none
			if !dies && (rep.Applied != 0 || rep.Pushed != 0) {
				t.Fatalf("a worker started from the saved state: %+v, want a quiet round", rep)
			}
			// And from there on as ever.
			rep = p.sync(func() { put(t, filepath.Join(p.sandbox, "d1", "new.go"), "package n") })
			if rep.Applied != 1 {
				t.Fatalf("the sandbox's change: %+v", rep)
			}
			p.same()
		})
	}
}

// TestPlacedListIsTheScan: what the host says it placed is, entry by entry,
// what a scan of the workspace records (modes, sizes, mtimes, change
// times, inodes, link targets), the directories' after their last child,
// with the system calls and the portable way: the helper takes it for its
// manifest instead of scanning.
func TestPlacedListIsTheScan(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprint("fast=", fast), func(t *testing.T) {
			placeFast = fast
			defer func() { placeFast = true }()
			p := newPair(t)
			placeTree(t, p.host)
			p.open() // reads the tree's .sbxignore
			t.Cleanup(func() { os.Chmod(filepath.Join(p.sandbox, "locked"), 0o755) })
			r, _, err := p.h.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Place(0, p.sandbox); err != nil {
				t.Fatal(err)
			}
			list := r.placedList[0]
			var buf bytes.Buffer
			if err := writePlacedList(&buf, list); err != nil {
				t.Fatal(err)
			}
			got, err := readPlacedList(&buf)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := NewMatcher(append(append([]string{}, DefaultExcludes...), r.Request.Dirs[0].Exclude...))
			if err != nil {
				t.Fatal(err)
			}
			scan, err := (&Scanner{Exclude: ex}).Scan(p.sandbox, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(scan) || len(got) != r.Request.Dirs[0].Placed {
				t.Fatalf("placed list %d entries, scan %d, placed count %d", len(got), len(scan), r.Request.Dirs[0].Placed)
			}
			links := 0
			for path, e := range scan {
				e.Hash, e.Verified = "", false
				if g, ok := got[path]; !ok || g != e {
					t.Errorf("%s: placed list %+v, scan %+v", path, g, e)
				}
				if e.isLink() {
					links++
				}
			}
			if links == 0 {
				t.Fatal("the tree has no symlink: the test does not check them")
			}
		})
	}
}

// TestPlaceEmptyCodeDir: an empty code dir's first push places nothing and
// the round trip goes on as for an empty streamed push (nothing after the
// patch: the placed list of nothing was trailing data).
func TestPlaceEmptyCodeDir(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprint("watched=", watched), func(t *testing.T) {
			WatchHelper = watched
			defer func() { WatchHelper = false }()
			p := newPair(t)
			r, helper, push := placedRound(t, p)
			if err := helper.Apply(push); err != nil {
				t.Fatal(err)
			}
			if err := ExpectEnd(push); err != nil {
				t.Fatalf("after the empty code dir's push: %v", err)
			}
			var pull bytes.Buffer
			reply := helper.Collect(&pull)
			if err := r.ReadPull(&pull); err != nil {
				t.Fatal(err)
			}
			if rep, err := r.Finish(reply); err != nil || rep.Pushed != 0 || rep.Applied != 0 {
				t.Fatalf("first round of an empty code dir: %+v, %v", rep, err)
			}
			if rep := p.sync(func() { put(t, filepath.Join(p.sandbox, "new.txt"), "n") }); rep.Applied != 1 {
				t.Fatalf("the sandbox's file: %+v", rep)
			}
			p.same()
		})
	}
}

// placedRound begins p's first round, places it and writes its push: the
// round, its helper and the push, for a test to go on by hand.
func placedRound(t *testing.T, p *pair) (*Round, *Helper, *bytes.Buffer) {
	t.Helper()
	os.MkdirAll(p.hstate+"-host", 0o700)
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Place(0, p.sandbox); err != nil {
		t.Fatal(err)
	}
	helper := p.helper(r)
	var push bytes.Buffer
	if err := r.WritePush(&push); err != nil {
		t.Fatal(err)
	}
	return r, helper, &push
}

// TestLastRoundSavesAfterCommand: the last round before a release (a full
// scan, as sbx exec's one command is) writes the helper's state only after
// its command, off the round trip: a placed push no longer waits for a
// save of its whole manifest. A process that dies during the command
// leaves no state, and the round after it (the release's last pull-back)
// finds the host's own files: nothing rewritten, no conflict.
func TestLastRoundSavesAfterCommand(t *testing.T) {
	for _, dies := range []bool{false, true} {
		t.Run(fmt.Sprint("dies=", dies), func(t *testing.T) {
			p := newPair(t)
			p.place = true
			agedTree(t, p.host, 200)
			p.h.FullScanNext()
			r, helper, push := placedRound(t, p)
			if !r.Request.FullScan {
				t.Fatal("the round is not the full-scan one")
			}
			if err := helper.Apply(push); err != nil {
				t.Fatal(err)
			}
			if got := helperStateFiles(p); len(got) != 0 {
				t.Fatalf("the last round saved its state before the command: %v", got)
			}
			hostTimes := hostMTimes(p.host)
			if !dies {
				finishRound(t, r, helper)
				WaitSaves()
				if got := helperStateFiles(p); len(got) != 1 {
					t.Fatalf("the last round's state was not written after its command: %v", got)
				}
			}
			quietRoundAfter(t, p, hostTimes) // the release's last pull-back, from the file or from none
		})
	}
}

// helperStateFiles lists the helper's state files of p.
func helperStateFiles(p *pair) []string {
	m, _ := filepath.Glob(filepath.Join(p.hstate, "*.state"))
	return m
}

// hostMTimes records the mtime of each regular file below root.
func hostMTimes(root string) map[string]time.Time {
	times := map[string]time.Time{}
	filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			times[path] = fi.ModTime()
		}
		return nil
	})
	return times
}

// finishRound ends r as the helper's Collect answers it.
func finishRound(t *testing.T, r *Round, helper *Helper) {
	t.Helper()
	var pull bytes.Buffer
	reply := helper.Collect(&pull)
	if err := r.ReadPull(&pull); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(reply); err != nil {
		t.Fatal(err)
	}
}

// quietRoundAfter runs the next round trip, which must find the host's own
// files in the sandbox: nothing applied, no conflict, no host file
// rewritten (times, recorded before), the trees the same.
func quietRoundAfter(t *testing.T, p *pair, times map[string]time.Time) Report {
	t.Helper()
	rep := p.sync(nil)
	if len(rep.Conflicts) != 0 || len(rep.HostKept) != 0 || rep.Applied != 0 {
		t.Fatalf("the round after: %+v", rep)
	}
	filepath.Walk(p.host, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !fi.ModTime().Equal(times[path]) {
			t.Errorf("%s was rewritten on the host", path)
		}
		return nil
	})
	p.same()
	return rep
}
