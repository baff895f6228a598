package sync

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// logHost opens a watching Host on a fresh state dir with two code dirs.
func logHost(t *testing.T) (*Host, string, []HostDir) {
	t.Helper()
	state := t.TempDir()
	dirs := []HostDir{{Path: t.TempDir()}, {Path: t.TempDir()}}
	h, err := OpenHost(state, dirs)
	if err != nil {
		t.Fatal(err)
	}
	h.Watch(nil)
	t.Cleanup(h.Close)
	return h, state, dirs
}

// loaded is the state a new process reads from state.
func loaded(t *testing.T, state string, dirs []HostDir) hostState {
	t.Helper()
	h, err := OpenHost(state, dirs)
	if err != nil {
		t.Fatal(err)
	}
	return h.st
}

// sameState compares two states as saved: the manifests (an empty one and
// a missing one alike), the round numbers, Reset and the skips.
func sameState(t *testing.T, what string, got, want hostState) {
	t.Helper()
	if got.Seq != want.Seq || got.Ack != want.Ack || got.Reset != want.Reset || got.Gen != want.Gen {
		t.Fatalf("%s: loaded seq %d ack %d reset %v gen %x, saved %d %d %v %x", what, got.Seq, got.Ack, got.Reset, got.Gen, want.Seq, want.Ack, want.Reset, want.Gen)
	}
	if len(got.Manifests) != len(want.Manifests) {
		t.Fatalf("%s: %d manifests loaded, %d saved", what, len(got.Manifests), len(want.Manifests))
	}
	for i := range want.Manifests {
		g, w := got.Manifests[i], want.Manifests[i]
		if len(g) != len(w) {
			t.Fatalf("%s: manifest %d: %d entries loaded, %d saved", what, i, len(g), len(w))
		}
		for p, e := range w {
			if o, ok := g[p]; !ok || o != e {
				t.Fatalf("%s: manifest %d: %s loaded as %+v (%v), saved as %+v", what, i, p, o, ok, e)
			}
		}
	}
	if !reflect.DeepEqual(nonEmpty(got.Skipped), nonEmpty(want.Skipped)) {
		t.Fatalf("%s: skips loaded %v, saved %v", what, got.Skipped, want.Skipped)
	}
}

// nonEmpty drops the empty maps of skips (gob writes none for them).
func nonEmpty(s []map[string]string) []map[string]string {
	var out []map[string]string
	for _, m := range s {
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// copyState deep-copies st, as the oracle of what was saved.
func copyState(st hostState) hostState {
	out := st
	out.Manifests = nil
	for _, m := range st.Manifests {
		c := Manifest{}
		for p, e := range m {
			c[p] = e
		}
		out.Manifests = append(out.Manifests, c)
	}
	out.Skipped = nil
	for _, m := range st.Skipped {
		c := map[string]string{}
		for p, r := range m {
			c[p] = r
		}
		out.Skipped = append(out.Skipped, c)
	}
	return out
}

// mutate changes h's state at random: entries put (new ones and changed
// ones, of every kind), deleted, manifests replaced whole, the numbers;
// each change said to the log as the host's code says it (changing,
// replaced).
func mutate(rng *rand.Rand, h *Host) {
	for k := rng.Intn(40); k > 0; k-- {
		i := rng.Intn(len(h.st.Manifests))
		m := h.st.Manifests[i]
		p := fmt.Sprintf("d%d/f%d", rng.Intn(5), rng.Intn(60))
		h.changing(i, p)
		switch rng.Intn(7) {
		case 0, 1:
			delete(m, p)
		case 2:
			m[p] = Entry{Mode: fs.ModeSymlink | 0o777, Link: fmt.Sprint("t", rng.Intn(9))}
		case 3:
			if e, ok := m[p]; ok {
				e.Verified = !e.Verified
				e.Hash = fmt.Sprintf("%064x", rng.Int63())
				m[p] = e
			}
		default:
			m[p] = Entry{Mode: 0o644, Size: rng.Int63n(1 << 20), MTime: rng.Int63(), CTime: rng.Int63(), Ino: rng.Uint64()}
		}
	}
	if rng.Intn(10) == 0 {
		// Replaced whole, as Finish does with a round's scans.
		i := rng.Intn(len(h.st.Manifests))
		c := Manifest{}
		for p, e := range h.st.Manifests[i] {
			if rng.Intn(3) > 0 {
				c[p] = e
			}
		}
		h.st.Manifests[i] = c
		h.replaced(i)
	}
	h.st.Seq = rng.Uint64()
	if rng.Intn(2) == 0 {
		h.st.Ack = h.st.Seq
	}
	h.st.Reset = rng.Intn(8) == 0
	h.st.Skipped = nil
	if rng.Intn(4) == 0 {
		h.st.Skipped = []map[string]string{nil, {fmt.Sprint("s", rng.Intn(3)): "unreadable"}}
	}
}

// TestStateLogLoadsAsSaved: whatever a watching process's saves write (most
// of them as records of the log, some whole), a new process loads exactly
// the state last saved; the base is rewritten only when the log outgrows
// it.
func TestStateLogLoadsAsSaved(t *testing.T) {
	defer func(was int64) { stateLogMin = was }(stateLogMin)
	stateLogMin = 8 << 10
	for seed := int64(0); seed < 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			h, state, dirs := logHost(t)
			appended, whole := 0, 0
			for round := 0; round < 120; round++ {
				mutate(rng, h)
				base, _ := os.Stat(h.statePath())
				if err := h.save(true); err != nil {
					t.Fatal(err)
				}
				after, _ := os.Stat(h.statePath())
				if base != nil && os.SameFile(base, after) {
					appended++
				} else {
					whole++
				}
				sameState(t, fmt.Sprint("round ", round), loaded(t, state, dirs), copyState(h.st))
			}
			if appended < 3*whole {
				t.Fatalf("%d saves appended to the log, %d rewrote the base: the log was not used", appended, whole)
			}
			if whole < 2 {
				t.Fatalf("%d saves rewrote the base: the log grew past its bound without a rewrite", whole)
			}
		})
	}
}

// TestStateLogTornRecord: a record cut short by a crash during its append
// is not applied (the state is the one saved before it), and the process
// that appends next, finding the log not as it left it, writes the state
// whole: nothing after the torn record is lost behind it.
func TestStateLogTornRecord(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for cut := 1; cut < 40; cut += 7 {
		t.Run(fmt.Sprint("cut", cut), func(t *testing.T) {
			h, state, dirs := logHost(t)
			mutate(rng, h)
			if err := h.save(true); err != nil {
				t.Fatal(err)
			}
			mutate(rng, h)
			if err := h.save(true); err != nil {
				t.Fatal(err)
			}
			before := copyState(h.st)
			fi, err := os.Stat(h.logPath())
			if err != nil {
				t.Fatalf("no log after a watching process's second save: %v", err)
			}
			mutate(rng, h)
			h.changing(0, "torn")
			h.st.Manifests[0]["torn"] = Entry{Mode: 0o600, Size: 5}
			if err := h.save(true); err != nil {
				t.Fatal(err)
			}
			li, _ := os.Stat(h.logPath())
			if li.Size() <= fi.Size() {
				t.Fatalf("the third save did not append (log %d then %d bytes)", fi.Size(), li.Size())
			}
			if err := os.Truncate(h.logPath(), li.Size()-int64(cut)); err != nil {
				t.Fatal(err)
			}
			sameState(t, "after a torn record", loaded(t, state, dirs), before)

			// A new process (it read the torn log) saves: whole.
			h2, err := OpenHost(state, dirs)
			if err != nil {
				t.Fatal(err)
			}
			h2.Watch(nil)
			defer h2.Close()
			h2.changing(1, "after")
			h2.st.Manifests[1]["after"] = Entry{Mode: 0o644, Size: 1}
			if err := h2.save(true); err != nil {
				t.Fatal(err)
			}
			h2.changing(1, "after2")
			h2.st.Manifests[1]["after2"] = Entry{Mode: 0o644, Size: 2}
			if err := h2.save(true); err != nil {
				t.Fatal(err)
			}
			sameState(t, "saved after the torn record", loaded(t, state, dirs), copyState(h2.st))
		})
	}
}

// twoSaves changes h's state and saves it twice: whole, then a record.
func twoSaves(t *testing.T, rng *rand.Rand, h *Host) {
	t.Helper()
	for range 2 {
		mutate(rng, h)
		if err := h.save(true); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStateLogOtherWriter: a process whose log another process appended to
// (or replaced) since its own last save does not append after that: it
// writes the state whole, so a load never mixes two processes' records.
func TestStateLogOtherWriter(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	h, state, dirs := logHost(t)
	twoSaves(t, rng, h)
	// Another process loads and appends.
	h2, err := OpenHost(state, dirs)
	if err != nil {
		t.Fatal(err)
	}
	h2.Watch(nil)
	defer h2.Close()
	mutate(rng, h2)
	h2.save(true) // whole: it just loaded
	mutate(rng, h2)
	h2.save(true) // appended
	// The first, unaware, saves its own state: whole, not a record after
	// the other's.
	base, _ := os.Stat(h.statePath())
	mutate(rng, h)
	if err := h.save(true); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(h.statePath()); os.SameFile(base, after) {
		t.Fatal("a process appended to a log another process had written")
	}
	sameState(t, "after the other writer", loaded(t, state, dirs), copyState(h.st))
}

// TestStateLogOldGenerationSkipped: the records of a log that outlived its
// base (its removal failed after a whole save) are skipped by the load.
func TestStateLogOldGenerationSkipped(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	h, state, dirs := logHost(t)
	twoSaves(t, rng, h)
	old, err := os.ReadFile(h.logPath())
	if err != nil || len(old) == 0 {
		t.Fatalf("no log: %v", err)
	}
	h.log.saved = nil // as a process that does not watch: whole
	mutate(rng, h)
	if err := h.save(true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.logPath()); !os.IsNotExist(err) {
		t.Fatalf("a whole save left the log: %v", err)
	}
	if err := os.WriteFile(h.logPath(), old, 0o600); err != nil {
		t.Fatal(err)
	}
	sameState(t, "with an older base's log", loaded(t, state, dirs), copyState(h.st))
}

// TestStateLogByAProcessThatDoesNotWatch: a process that does not watch
// (sbx exec without its daemon) replaces its manifests with each round's
// scan and keeps the ones it loaded as the copy to compare with: its saves
// are records too, with no copy made; one that changes a manifest it
// loaded in place (a rejected deletion forgotten) writes the state whole.
func TestStateLogByAProcessThatDoesNotWatch(t *testing.T) {
	state := t.TempDir()
	dirs := []HostDir{{Path: t.TempDir()}}
	h, err := OpenHost(state, dirs)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(4))
	mutate(rng, h)
	if err := h.save(true); err != nil { // whole: nothing saved yet
		t.Fatal(err)
	}
	for round := range 4 {
		h, err = OpenHost(state, dirs) // each round a process of its own
		if err != nil {
			t.Fatal(err)
		}
		base, _ := os.Stat(h.statePath())
		cur := Manifest{} // the round's scan, a new map
		for p, e := range h.st.Manifests[0] {
			if rng.Intn(4) > 0 {
				cur[p] = e
			}
		}
		cur[fmt.Sprint("new", round)] = Entry{Mode: 0o644, Size: int64(round)}
		h.replaced(0)
		h.st.Manifests[0] = cur
		if err := h.save(false); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.Stat(h.statePath()); !os.SameFile(base, after) {
			t.Fatalf("round %d: a process that does not watch rewrote the base for a round's scan", round)
		}
		sameState(t, fmt.Sprint("round ", round), loaded(t, state, dirs), copyState(h.st))
	}
	h, err = OpenHost(state, dirs)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := os.Stat(h.statePath())
	h.changing(0)
	delete(h.st.Manifests[0], "new1") // in place, in the map it loaded
	if err := h.save(true); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(h.statePath()); os.SameFile(base, after) {
		t.Fatal("a change in place to the manifest a process loaded was appended against that same map")
	}
	sameState(t, "after a change in place", loaded(t, state, dirs), copyState(h.st))
	if _, err := os.Stat(filepath.Join(state, "sync.state"+stateLogSuffix)); !os.IsNotExist(err) {
		t.Fatalf("a whole save left the log: %v", err)
	}
}
