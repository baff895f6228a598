package sync

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// stateStamp identifies the helper's state file as written: a save renames
// a new file over it (a new inode).
func stateStamp(t *testing.T, dir string) string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(dir, "*.state"))
	if len(ms) != 1 {
		t.Fatalf("state files in %s: %v", dir, ms)
	}
	fi, err := os.Stat(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	ctime, ino := statIDs(fi)
	return strconv.FormatUint(ino, 10) + ":" + strconv.FormatInt(ctime, 10)
}

func agedTree(t *testing.T, root string, n int) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for i := range n {
		f := filepath.Join(root, "d"+strconv.Itoa(i%50), strconv.Itoa(i)+".go")
		put(t, f, "package x // "+strconv.Itoa(i))
		os.Chtimes(f, old, old)
	}
}

// Issue 13, item 1: a round trip that changes nothing writes no state on the
// sandbox side. Before, every round trip gob-encoded and wrote the whole
// manifest twice (loading folded the pending manifest in and marked it
// dirty, Apply saved, Collect saved again). A round trip that changes
// something writes it once.
func TestNoChangeRoundTripWritesNoHelperState(t *testing.T) {
	p := newPair(t)
	agedTree(t, p.host, 300)
	p.sync(nil)
	p.sync(func() { put(t, filepath.Join(p.sandbox, "new.txt"), "from the sandbox") })
	p.sync(nil) // acknowledges that pull
	for i := range 4 {
		before := stateStamp(t, p.hstate)
		if rep := p.sync(nil); rep.Pushed != 0 || rep.Applied != 0 {
			t.Fatalf("round %d: %+v", i, rep)
		}
		if after := stateStamp(t, p.hstate); after != before {
			t.Fatalf("no-change round %d rewrote the helper's state file", i)
		}
	}
	// A sandbox change: written once, by Collect.
	saves := stateSaves.Load()
	p.sync(func() { put(t, filepath.Join(p.sandbox, "d1", "1.go"), "package y") })
	if n := stateSaves.Load() - saves; n != 1 {
		t.Fatalf("a round trip with one sandbox change saved the state %d times, want 1", n)
	}
	p.same()
}

// Issue 13, item 1: a long-lived helper process takes its state from memory
// at each round trip, without decoding the file or copying the manifest
// (before, each load cloned the whole map).
func TestHelperStateNotCopiedOnLoad(t *testing.T) {
	p := newPair(t)
	agedTree(t, p.host, 20000)
	p.sync(nil)
	p.sync(nil)
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	req := r.Request
	req.StateDir = p.hstate
	req.Dirs[0].Path = p.sandbox
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	h, err := NewHelper(req)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	// A copy of 20k entries is megabytes; loading from memory is a few
	// small allocations.
	if n := ms.TotalAlloc - before; n > 256<<10 {
		t.Fatalf("loading a 20k-entry state allocated %d bytes: the manifest was decoded or copied", n)
	}
	if len(h.dirs) != 1 || len(h.dirs[0].state.Manifest) < 20000 {
		t.Fatalf("loaded state: %d dirs", len(h.dirs))
	}
}

// TestSettledHashesStaySettled: files pushed while racy are hashed again
// once, when they have aged, and then never again: a round trip that pulls
// nothing left the settling in the helper's undo of the unacknowledged
// pull, so every later round trip restored, re-read and saved them (2,000
// files re-hashed per command after 10% of a 20k tree was edited).
func TestSettledHashesStaySettled(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprint("watched=", watched), func(t *testing.T) {
			if watched {
				WatchHelper = true
				defer func() { WatchHelper = false }()
			}
			p := newPair(t)
			if watched {
				p.h.Watch(nil)
				defer p.h.Close()
			}
			written := time.Now()
			for i := 0; i < 20; i++ {
				put(t, filepath.Join(p.host, "d", fmt.Sprintf("f%d", i)), fmt.Sprintf("content %d", i))
			}
			p.sync(nil) // pushed while racy: hashed, not verified
			for time.Since(written) <= racyWindow+100*time.Millisecond {
				time.Sleep(50 * time.Millisecond) // the files age past the racy window
			}
			before := hostStateInfo(p)
			p.sync(nil) // settles them
			after := hostStateInfo(p)
			if watched && (before == nil || after == nil || !after.ModTime().Equal(before.ModTime())) {
				t.Fatal("a watching host rewrote its state for hashes that only settled")
			}
			for k := 0; k < 3; k++ {
				WaitSaves() // the last round's, written after its reply
				h0, s0 := hashedFiles.Load(), stateSaves.Load()
				p.sync(nil)
				WaitSaves()
				if h, s := hashedFiles.Load()-h0, stateSaves.Load()-s0; h != 0 || s != 0 {
					t.Fatalf("no-change round trip %d after the hashes settled: %d files hashed, %d helper state saves", k, h, s)
				}
			}
		})
	}
}

// TestWatchedSmallPushNotSaved: a long-lived (watching) helper keeps a
// small push in memory instead of rewriting its state file; a process that
// then starts from the file (the worker died) sends those files back, and
// the host takes them for what they are: its own, no change, no conflict.
func TestWatchedSmallPushNotSaved(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	p := newPair(t)
	p.h.Watch(nil)
	defer p.h.Close()
	put(t, filepath.Join(p.host, "a"), "a")
	p.sync(nil)
	p.sync(nil)
	put(t, filepath.Join(p.host, "a"), "a2")
	WaitSaves() // the last round's, written after its reply
	s0 := stateSaves.Load()
	p.sync(nil)
	WaitSaves()
	if s := stateSaves.Load() - s0; s != 0 {
		t.Fatalf("a one-file push to a watching helper saved its state %d times", s)
	}
	// The worker dies: what it kept in memory is gone.
	live.Lock()
	for f, ls := range live.m {
		ls.watch.Close()
		delete(live.m, f)
	}
	live.Unlock()
	rep := p.sync(nil)
	if got := read(t, filepath.Join(p.host, "a")); got != "a2" || len(rep.Conflicts) != 0 || len(rep.HostKept) != 0 {
		t.Fatalf("after the helper lost its unsaved push: host a = %q, report %+v", got, rep)
	}
	p.same()
}

// TestEndsAfterNextSavesNothing: the round before a release that brings
// nothing back does not write the host's state, which no later round trip
// reads (a one-command sbx exec paid a gob of its manifest and an fsync for
// it); one that brings changes back saves as ever, and the word holds for
// one round trip only.
func TestEndsAfterNextSavesNothing(t *testing.T) {
	state := func(p *pair) string { return p.h.stateSig() }
	for _, last := range []bool{false, true} {
		t.Run(fmt.Sprint("last=", last), func(t *testing.T) {
			p := newPair(t)
			put(t, filepath.Join(p.host, "a"), "a")
			if last {
				p.h.EndsAfterNext()
			}
			p.sync(nil) // a first round: it saves, unless the session ends
			if saved := state(p) != ""; saved == last {
				t.Fatalf("EndsAfterNext %v: the first round saved the state: %v", last, saved)
			}
		})
	}
	t.Run("changes-back", func(t *testing.T) {
		p := newPair(t)
		put(t, filepath.Join(p.host, "a"), "a")
		p.sync(nil)
		before := state(p)
		if before == "" {
			t.Fatal("the first round saved no state")
		}
		p.h.EndsAfterNext()
		rep := p.sync(func() { put(t, filepath.Join(p.sandbox, "b"), "b") })
		if rep.Applied != 1 || read(t, filepath.Join(p.host, "b")) != "b" {
			t.Fatalf("the sandbox's file did not come back: %+v", rep)
		}
		// A save renames a new file over the old, or appends to its log.
		if after := state(p); after == "" || after == before {
			t.Fatal("a last round that brought a change back did not save the state")
		}
	})
	t.Run("later-process", func(t *testing.T) {
		// The release failed after a last round that saved nothing, and a
		// later process takes the sandbox on: it finds no state, pushes
		// everything again as to a new sandbox, and the sandbox, which
		// holds the same files, brings nothing back and keeps them.
		p := newPair(t)
		put(t, filepath.Join(p.host, "a"), "a")
		put(t, filepath.Join(p.host, "d", "b"), "b")
		p.h.EndsAfterNext()
		p.sync(nil) // a one-command session's round: nothing comes back, nothing saved
		if state(p) != "" {
			t.Fatal("the last round saved the state")
		}
		p.open() // the later process
		rep := p.sync(nil)
		if rep.Applied != 0 || len(rep.Conflicts) != 0 || rep.Pushed != 3 {
			t.Fatalf("the later process's round pushed %d (want the 3 entries again), brought back %d, conflicts %v", rep.Pushed, rep.Applied, rep.Conflicts)
		}
		for _, f := range []string{"a", "d/b"} {
			if h, sb := read(t, filepath.Join(p.host, f)), read(t, filepath.Join(p.sandbox, f)); h != sb || len(h) != 1 {
				t.Errorf("%s: host %q, sandbox %q", f, h, sb)
			}
		}
	})
	t.Run("one-round", func(t *testing.T) {
		p := newPair(t)
		put(t, filepath.Join(p.host, "a"), "a")
		p.sync(nil)
		p.h.EndsAfterNext()
		p.sync(nil)
		before := state(p)
		for i := 0; i < pushSaveMin; i++ {
			put(t, filepath.Join(p.host, "many", fmt.Sprint(i)), "x")
		}
		p.sync(nil) // a push this large saves, the session's end being past
		// A save renames a new file over the old, or appends to its log.
		if after := state(p); after == "" || after == before {
			t.Fatal("the round after the last one did not save a large push: EndsAfterNext held past its round")
		}
	})
}

// hostStateInfo stats the host's saved sync state of p (nil: none).
func hostStateInfo(p *pair) os.FileInfo {
	fi, _ := os.Stat(p.h.statePath())
	return fi
}

// A state file over maxStateBytes (a command in the sandbox can make the
// helper's a sparse file of any size, which costs no disk) is not read
// into memory past the bound: it is taken for unreadable, and the round
// trip scans in full and converges. The host's is treated the same way.
func TestStateOverTheBoundNotRead(t *testing.T) {
	defer func(was int64) { maxStateBytes = was }(maxStateBytes)
	maxStateBytes = 1 << 20
	p := newPair(t)
	agedTree(t, p.host, 50)
	p.sync(nil)
	ms, _ := filepath.Glob(filepath.Join(p.hstate, "*.state"))
	if len(ms) != 1 {
		t.Fatalf("helper state files: %v", ms)
	}
	for _, f := range []string{ms[0], p.h.statePath()} {
		if err := os.Truncate(f, 8<<30); err != nil {
			t.Fatal(err)
		}
	}
	_, err := readState(io.LimitReader(zeros{}, 8<<30))
	if !errors.Is(err, errStateTooBig) {
		t.Fatalf("readState of an 8 GiB stream: %v", err)
	}
	p.open() // a new process on the host side
	if !p.h.st.Reset {
		t.Error("the host's state over the bound was taken for a state")
	}
	live.Lock()
	live.m = map[string]*liveState{} // and a new process on the sandbox side
	live.Unlock()
	put(t, filepath.Join(p.host, "after.txt"), "after")
	p.sync(func() { put(t, filepath.Join(p.sandbox, "from-sandbox.txt"), "s") })
	p.sync(nil)
	p.same()
	if read(t, filepath.Join(p.host, "from-sandbox.txt")) != "s" {
		t.Error("the sandbox's change did not come back")
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// TestSmallPushSurvivesANewProcess: a file the host created and pushed in
// a small round, then deleted after its process ended (sbx exec after the
// host daemon stopped, or the next sbx exec), is deleted in the sandbox
// too. A small push was once not saved: the next process's manifest did
// not have the file, its scan found nothing to push, and the sandbox kept
// the file, which came back to the host with the sandbox's next change to
// it.
func TestSmallPushSurvivesANewProcess(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprint("watched=", watched), func(t *testing.T) {
			WatchHelper = watched
			defer func() { WatchHelper = false }()
			p := newPair(t)
			if watched {
				p.h.Watch(nil)
			}
			put(t, filepath.Join(p.host, "keep"), "k")
			p.sync(nil)
			p.sync(nil)
			put(t, filepath.Join(p.host, "gone"), "g")
			if rep := p.sync(nil); rep.Pushed != 1 {
				t.Fatalf("pushed %d, want the one new file", rep.Pushed)
			}
			p.h.Close()
			p.open() // a new process on the host side
			if watched {
				p.h.Watch(nil)
				defer p.h.Close()
			}
			os.Remove(filepath.Join(p.host, "gone"))
			p.sync(nil)
			if _, err := os.Lstat(filepath.Join(p.sandbox, "gone")); !os.IsNotExist(err) {
				t.Fatalf("the host deleted a file after a new process took over, and the sandbox still has it: %v", err)
			}
			p.same()
		})
	}
}
