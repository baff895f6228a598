package sync

import (
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// contents lists the content of every regular file under root, by content.
func contents(root string) map[string][]string {
	out := map[string][]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			out[string(b)] = append(out[string(b)], rel)
		}
		return nil
	})
	return out
}

// files maps each regular file's relative path to its content.
func files(root string) map[string]string {
	out := map[string]string{}
	for c, ps := range contents(root) {
		for _, p := range ps {
			out[p] = c
		}
	}
	return out
}

type mutator struct {
	rng  *rand.Rand
	n    *int
	side string
}

var names = []string{"a", "b", "c", "d/e", "d/f", "g/h/i"}

// step applies one random operation under root.
func (m mutator) step(t *testing.T, root string) {
	name := names[m.rng.Intn(len(names))]
	p := filepath.Join(root, name)
	*m.n++
	switch m.rng.Intn(10) {
	case 0, 1, 2: // write new content (sometimes the same size, same tick)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			os.RemoveAll(p)
		}
		os.WriteFile(p, []byte(fmt.Sprintf("%s-v%04d", m.side, *m.n)), 0o644)
	case 3: // delete
		os.RemoveAll(p)
	case 4: // chmod
		os.Chmod(p, 0o700|os.FileMode(m.rng.Intn(2))*0o055)
	case 5: // symlink to a sibling
		os.RemoveAll(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.Symlink(filepath.Base(names[m.rng.Intn(len(names))]), p)
	case 6: // rename
		q := filepath.Join(root, names[m.rng.Intn(len(names))])
		if fi, err := os.Lstat(q); err == nil && fi.IsDir() {
			return
		}
		os.MkdirAll(filepath.Dir(q), 0o755)
		os.Rename(p, q)
	case 7: // remove a directory tree
		os.RemoveAll(filepath.Join(root, dirNames[m.rng.Intn(len(dirNames))]))
	case 8: // a directory where a file (or nothing) was
		os.RemoveAll(p)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "x"), []byte(fmt.Sprintf("%s-v%04d", m.side, *m.n)), 0o644)
	case 9: // a file where a directory was
		q := filepath.Join(root, dirNames[m.rng.Intn(len(dirNames))])
		os.RemoveAll(q)
		os.MkdirAll(filepath.Dir(q), 0o755)
		os.WriteFile(q, []byte(fmt.Sprintf("%s-v%04d", m.side, *m.n)), 0o644)
	}
}

var dirNames = []string{"d", "g", "g/h"}

// journaled lists the contents the journal keeps.
func journaled(dir string) map[string]bool {
	out := map[string]bool{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(p) != "entries.json" {
			b, _ := os.ReadFile(p)
			out[string(b)] = true
		}
		return nil
	})
	return out
}

// TestPropertyNothingLost runs random operations on both sides with syncs
// between and checks, after each round trip, that no version is lost: what
// the sandbox had when its command ended is on the host (at its path or in a
// conflict copy), what the host changed meanwhile is still at its path, and
// after a quiet round trip both trees are the same.
func TestPropertyNothingLost(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 3
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { propertyRun(t, seed, false) })
	}
}

// TestPropertyNothingLostWatched is the same with both sides watching their
// trees (Host.Watch, WatchHelper), with overflows injected, watchers killed
// between and during round trips, and edits during the command; after each
// quiet round trip each side's manifest, kept current from events, is what a
// full scan finds.
//
// Seeds 1, 3-9, 12-14, 16, 17, 20-22, 25 and 27-29 failed before two fixes:
// a directory the sync itself made (or an undo restored) is in the
// manifest without ever having had a watch, so nothing done in it later was
// seen (the incremental scan now walks a known directory that has no
// watch); and a pull-back or a push that changes the manifest without the
// tree (a path marked unknown after a conflict, the files a removal kept
// forgotten) made no event (each item's path is touched). SBX_PROPERTY_SEEDS
// runs more seeds.
func TestPropertyNothingLostWatched(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	// Every push saved before its command, so that each goes through the
	// helper's log (helperlog.go), which the rounds check against memory
	// and restart helper processes from.
	helperSaveMin = 1
	defer func() { helperSaveMin = pushSaveMin }()
	appends0 := stateAppends.Load()
	defer func() {
		if stateAppends.Load() == appends0 && !t.Failed() {
			t.Error("no push was saved as a record of the helper's log")
		}
	}()
	seeds := 30
	if testing.Short() {
		seeds = 3
	}
	if n, err := strconv.Atoi(os.Getenv("SBX_PROPERTY_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	inc0, full0 := incrementalScans.Load(), fullScans.Load()
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { propertyRun(t, seed, true) })
	}
	// The events were used: most scans were incremental (the injected
	// faults, the renames of directories and the conflicts' moves force a
	// full one now and then: about a third over 200 seeds).
	inc, full := incrementalScans.Load()-inc0, fullScans.Load()-full0
	t.Logf("%d incremental scans, %d full", inc, full)
	if inc <= full {
		t.Fatalf("%d incremental scans against %d full ones: the watches were not used", inc, full)
	}
}

// helperWatch is the watch the helper process keeps for p's sandbox.
func helperWatch(p *pair) *Watch {
	live.Lock()
	defer live.Unlock()
	for f, ls := range live.m {
		if strings.HasPrefix(f, p.hstate+string(filepath.Separator)) {
			return ls.watch
		}
	}
	return nil
}

// inject breaks a watch at random: an overflow, or its reader killed.
func inject(rng *rand.Rand, w *Watch) string {
	if w == nil || w.n == nil {
		return ""
	}
	switch rng.Intn(6) {
	case 0:
		w.n.overflow()
		return "overflow"
	case 1:
		w.n.kill()
		return "killed"
	}
	return ""
}

// checkCurrent compares a watched manifest with a full scan of its tree.
func checkCurrent(t *testing.T, side, root string, m Manifest) {
	t.Helper()
	full, err := (&Scanner{Exclude: mustMatcher(DefaultExcludes)}).Scan(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p, e := range full {
		if o, ok := m[p]; !ok || !sameIgnoringHash(o, e) {
			t.Errorf("%s: the watched manifest has %s as %+v (%v), a full scan %+v", side, p, o, ok, e)
		}
	}
	for p := range m {
		if _, ok := full[p]; !ok {
			t.Errorf("%s: the watched manifest has %s, a full scan does not", side, p)
		}
	}
}

func propertyRun(t *testing.T, seed int, watched bool) {
	rng := rand.New(rand.NewSource(int64(seed)))
	n := 0
	host := mutator{rng, &n, "host"}
	sbox := mutator{rng, &n, "sandbox"}
	p := newPair(t)
	// Odd seeds start as a new local sandbox does: a tree on the host
	// first, its push placed into the sandbox dir.
	if p.place = seed%2 == 1; p.place {
		pre := mutator{rand.New(rand.NewSource(int64(seed) + 1e6)), &n, "host"}
		for k := 3 + pre.rng.Intn(6); k > 0; k-- {
			pre.step(t, p.host)
		}
	}
	if watched {
		p.h.Watch(nil)
		defer func() { p.h.Close() }()
	}
	// Each save's record, taken from the paths the host listed as changed,
	// is what a whole comparison finds.
	checkDelta = func(listed, whole []dirDelta) {
		for i := range whole {
			if !sameDelta(listed[i], whole[i]) {
				t.Errorf("the state's record of code dir %d lists puts %v deletions %v, a whole comparison %v %v", i, slices.Sorted(maps.Keys(listed[i].Put)), listed[i].Del, slices.Sorted(maps.Keys(whole[i].Put)), whole[i].Del)
			}
		}
	}
	defer func() { checkDelta = nil }()
	// Each push of a scan made anew (the unwatched host), taken over the
	// paths the scan listed as changed, is Diff's of the whole manifests.
	checkScanDiff = func(over, whole []Change) {
		if !reflect.DeepEqual(over, whole) && len(over)+len(whole) > 0 {
			t.Errorf("the push over the scan's changed paths is %+v, Diff's %+v", over, whole)
		}
	}
	defer func() { checkScanDiff = nil }()
	for i := 0; i < 25; i++ {
		if watched {
			if what := inject(rng, p.h.dirs[0].watch); what != "" {
				t.Logf("round %d: host watch %s", i, what)
			}
			if what := inject(rng, helperWatch(p)); what != "" {
				t.Logf("round %d: helper watch %s", i, what)
			}
		}
		for k := rng.Intn(3); k > 0; k-- {
			host.step(t, p.host)
		}
		var sandboxEnd, hostBefore, hostEnd map[string]string
		t.Logf("round %d: host before push: %v", i, files(p.host))
		rep := p.sync(func() {
			hostBefore = files(p.host)
			if watched && rng.Intn(8) == 0 {
				inject(rng, helperWatch(p)) // mid-command
			}
			for k := rng.Intn(4); k > 0; k-- {
				sbox.step(t, p.sandbox)
			}
			// Sometimes the host changes during the command too.
			for k := rng.Intn(2); k > 0; k-- {
				host.step(t, p.host)
			}
			sandboxEnd = files(p.sandbox)
			hostEnd = files(p.host)
		})
		t.Logf("round %d: sandbox end %v host end %v report %+v", i, sandboxEnd, hostEnd, rep)
		if i == 0 && p.place && p.placeErr != nil {
			t.Fatalf("round 0: the first push was not placed: %v", p.placeErr)
		}
		for _, r := range rep.Refused {
			if rel, err := filepath.Rel(p.sandbox, r.Path); err == nil {
				if p.ignore == nil {
					p.ignore = map[string]bool{}
				}
				p.ignore[filepath.ToSlash(rel)] = true
				delete(sandboxEnd, filepath.ToSlash(rel))
			}
		}
		after := files(p.host)
		have := contents(p.host)
		kept := journaled(p.h.Journal.Dir)
		for path, c := range hostEnd {
			if _, ok := have[c]; !ok && !kept[c] {
				t.Fatalf("round %d: the host's %s (%q) is neither in the tree nor in the journal", i, path, c)
			}
		}
		for path, c := range sandboxEnd {
			if hostBefore[path] == c {
				continue // what the push brought; the host may change it
			}
			if _, ok := have[c]; !ok {
				t.Fatalf("round %d: the sandbox's %s (%q) is nowhere on the host", i, path, c)
			}
		}
		for path, c := range hostEnd {
			if hostBefore[path] != c && after[path] != c {
				t.Fatalf("round %d: the host's change to %s (%q) was overwritten by %q", i, path, c, after[path])
			}
		}
		if len(rep.Held) > 0 {
			// Held deletions: accepted or rejected at random; either
			// way nothing the host changed is lost.
			if rng.Intn(2) == 0 {
				res, err := AcceptDeletions(p.h.Journal.Dir, p.h.Journal)
				t.Logf("round %d: accepted %+v %v", i, res, err)
			} else {
				n, err := RejectDeletions(p.h.Journal.Dir)
				t.Logf("round %d: rejected %d %v", i, n, err)
			}
		}
		sig := p.h.sig
		rep = p.sync(nil)
		t.Logf("round %d: quiet %+v", i, rep)
		p.same()
		if p.h.sig != sig {
			// Saved (most often as a record of the state's log): a new
			// process loads the state as this one has it.
			st := loaded(t, p.hstate+"-host", []HostDir{{Path: p.host}})
			sameState(t, fmt.Sprintf("round %d: the host's state as loaded", i), st, copyState(p.h.st))
		}
		if watched {
			checkCurrent(t, "host", p.host, p.h.st.Manifests[0])
			live.Lock()
			for f, ls := range live.m {
				if strings.HasPrefix(f, p.hstate+string(filepath.Separator)) {
					checkCurrent(t, "sandbox", p.sandbox, ls.state.Manifest)
				}
			}
			live.Unlock()
		}
		if t.Failed() {
			dump(t, p)
			t.FailNow()
		}
		if watched {
			// Where the helper's files hold its state (most often a base
			// and the records of its log), a new process loads what
			// memory holds.
			WaitSaves()
			live.Lock()
			for f, ls := range live.m {
				if strings.HasPrefix(f, p.hstate+string(filepath.Separator)) && ls.log.current {
					sameHelperState(t, fmt.Sprintf("round %d: the helper's state as loaded", i), loadedHelper(t, f), ls.state)
				}
			}
			live.Unlock()
			if rng.Intn(4) == 0 {
				// The worker ends (the init trimmed it, or a command
				// killed it after its push was saved); a new one goes on
				// from the files.
				t.Logf("round %d: a new helper process", i)
				live.Lock()
				for f, ls := range live.m {
					if strings.HasPrefix(f, p.hstate+string(filepath.Separator)) {
						ls.watch.Close()
						delete(live.m, f)
					}
				}
				live.Unlock()
			}
		}
		if rng.Intn(5) == 0 {
			// The host's process ends; a new one goes on from the state
			// (the CLI's host daemon ended, or each sbx exec).
			t.Logf("round %d: a new host process", i)
			p.h.Close()
			p.open()
			if watched {
				p.h.Watch(nil)
			}
		}
	}
}

// loadedHelper is the helper's state in file as a new process loads it:
// the base, then its log.
func loadedHelper(t *testing.T, file string) helperState {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := decodeHelperState(raw)
	if !ok {
		t.Fatalf("%s does not decode", file)
	}
	readHelperLog(file+stateLogSuffix, &st)
	return st
}

// sameHelperState compares two helper states but for the base's
// generation.
func sameHelperState(t *testing.T, what string, got, want helperState) {
	t.Helper()
	got.Gen, want.Gen = 0, 0
	if len(got.Skipped) == 0 && len(want.Skipped) == 0 {
		got.Skipped, want.Skipped = nil, nil
	}
	if len(got.Undo) == 0 && len(want.Undo) == 0 {
		got.Undo, want.Undo = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		for p, e := range want.Manifest {
			if o, ok := got.Manifest[p]; !ok || o != e {
				t.Errorf("%s: %s is %+v (%v), in memory %+v", what, p, o, ok, e)
			}
		}
		for p, o := range got.Manifest {
			if _, ok := want.Manifest[p]; !ok {
				t.Errorf("%s: %s is %+v, not in memory", what, p, o)
			}
		}
		t.Errorf("%s: Undo %v seq %d skipped %v; in memory %v %d %v", what, got.Undo, got.PendingSeq, got.Skipped, want.Undo, want.PendingSeq, want.Skipped)
	}
}

func dump(t *testing.T, p *pair) {
	for _, side := range []string{p.host, p.sandbox} {
		var lines []string
		for path, c := range files(side) {
			lines = append(lines, path+"="+c)
		}
		sort.Strings(lines)
		t.Logf("%s:\n%s", side, strings.Join(lines, "\n"))
	}
}

// sameDelta compares two records' changes of a code dir as sets.
func sameDelta(a, b dirDelta) bool {
	if len(a.Put) != len(b.Put) || len(a.Del) != len(b.Del) {
		return false
	}
	for p, e := range a.Put {
		if o, ok := b.Put[p]; !ok || o != e {
			return false
		}
	}
	dels := map[string]bool{}
	for _, p := range a.Del {
		dels[p] = true
	}
	for _, p := range b.Del {
		if !dels[p] {
			return false
		}
	}
	return true
}
