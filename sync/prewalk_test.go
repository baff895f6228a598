package sync

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// openPrewalked opens p's host side with the first scan's walk started at
// once (HostDir.Prewalk), and waits for that walk to end.
func (p *pair) openPrewalked() {
	p.t.Helper()
	h, err := OpenHost(p.hstate+"-host", []HostDir{{Path: p.host, Prewalk: true}})
	if err != nil {
		p.t.Fatal(err)
	}
	h.Journal = &Journal{Dir: p.hstate + "-journal"}
	p.h = h
	if h.dirs[0].pre == nil {
		p.t.Fatal("OpenHost started no prewalk")
	}
	<-h.dirs[0].pre.done
}

func pushed(t *testing.T, r *Round) []string {
	t.Helper()
	var out []string
	for _, c := range r.changes[0] {
		out = append(out, c.Path)
	}
	slices.Sort(out)
	return out
}

// The first round trip after OpenHost takes the tree as the prewalk saw
// it; what changed after it is the next round trip's, and nothing is lost.
func TestPrewalkIsTheFirstScan(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "a"), "1")
	p.sync(nil)
	put(t, filepath.Join(p.host, "b"), "before the open")
	p.openPrewalked()
	put(t, filepath.Join(p.host, "c"), "after the prewalk")
	rep := p.sync(nil)
	if rep.Pushed != 1 {
		t.Errorf("first round after the open pushed %d, want 1 (b, which the prewalk saw)", rep.Pushed)
	}
	if got := read(t, filepath.Join(p.sandbox, "b")); got != "before the open" {
		t.Errorf("sandbox b: %q", got)
	}
	if p.h.dirs[0].pre != nil {
		t.Error("the prewalk is kept after the first round trip")
	}
	rep = p.sync(nil)
	if rep.Pushed != 1 || read(t, filepath.Join(p.sandbox, "c")) != "after the prewalk" {
		t.Errorf("second round pushed %d, sandbox c %q: want c", rep.Pushed, read(t, filepath.Join(p.sandbox, "c")))
	}
	p.same()
}

// A pull-back that waits to be applied (pull.pending) writes the tree
// before the scan: a walk made before it is dropped, whether the pending
// file was there at the open (no prewalk starts) or came after it.
func TestPrewalkNotAcrossAPendingPull(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "a"), "1")
	p.sync(nil)
	pending := filepath.Join(p.hstate+"-host", "pull.pending")

	// There at the open: no walk is started.
	if err := os.WriteFile(pending, []byte("not a number\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHost(p.hstate+"-host", []HostDir{{Path: p.host, Prewalk: true}})
	if err != nil {
		t.Fatal(err)
	}
	if h.dirs[0].pre != nil {
		t.Error("a prewalk started with a pull-back pending")
	}
	os.Remove(pending)

	// Come after the prewalk: Begin scans afresh.
	p.openPrewalked()
	put(t, filepath.Join(p.host, "b"), "after the prewalk")
	if err := os.WriteFile(pending, []byte("not a number\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if got := pushed(t, r); !slices.Equal(got, []string{"b"}) {
		t.Errorf("pushed %q, want [b]: the scan after recover must be the tree's", got)
	}
}

// Two processes of one session (two first `sbx exec --keep` calls at
// once): each opens the host side, the prewalk of the one that waits for
// the lock runs while the other's round trip applies a command's change to
// the tree and rewrites the state. That walk and the state this process
// loaded describe the tree before the other's round: Begin reads the state
// again and scans afresh, or the next pull-back takes the other's change
// for undone (CI: a line appended by one of four concurrent commands was
// missing from the host's file).
func TestPrewalkNotAcrossAnotherProcessRound(t *testing.T) {
	p := newPair(t)
	put(t, filepath.Join(p.host, "runs.txt"), "")
	p.sync(nil)
	p.openPrewalked()
	first := p.h
	p.open() // the other process
	p.sync(func() { appendTo(t, filepath.Join(p.sandbox, "runs.txt"), "other\n") })
	if got := read(t, filepath.Join(p.host, "runs.txt")); got != "other\n" {
		t.Fatalf("the other process's round left runs.txt %q on the host", got)
	}
	p.h = first
	p.sync(func() { appendTo(t, filepath.Join(p.sandbox, "runs.txt"), "first\n") })
	if got := read(t, filepath.Join(p.host, "runs.txt")); got != "other\nfirst\n" {
		t.Errorf("runs.txt on the host after both rounds: %q, want both lines", got)
	}
	if p.h.dirs[0].pre != nil {
		t.Error("the walk made before the other process's round is kept")
	}
	p.same()
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
