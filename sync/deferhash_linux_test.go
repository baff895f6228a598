package sync

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// TestWatchedPushHashesWhatItSends: a watched host scan leaves unread the
// racy files whose stat shows a change (they travel anyway), and the push
// records the hash of what it sent: no file is read twice in a round. The
// hash is the one a scan would take: a same-size rewrite within the tick
// of the host's write, with its events lost, is still found by the next
// round (the files stay unsettled), and a file the push could not send
// whole (it was a fifo when packed) is sent again even when it comes back
// as it was.
func TestWatchedPushHashesWhatItSends(t *testing.T) {
	p := newPair(t)
	p.h.Watch(nil)
	defer p.h.Close()
	const n = 30
	name := func(i int) string { return filepath.Join("d", strconv.Itoa(i)+".go") }
	old := time.Now().Add(-time.Hour)
	for i := range n {
		put(t, filepath.Join(p.host, name(i)), "one")
		os.Chtimes(filepath.Join(p.host, name(i)), old, old)
	}
	p.sync(nil)
	p.sync(nil)
	for i := range n {
		put(t, filepath.Join(p.host, name(i)), "two, longer") // racy now
	}
	before := hashedFiles.Load()
	r, _, err := p.h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if got := hashedFiles.Load() - before; got != 0 {
		t.Errorf("the scan read %d of the %d changed files the push reads anyway", got, n)
	}
	// One of them is a fifo when the push packs it.
	fifo := filepath.Join(p.host, name(1))
	os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	helper := p.helper(r)
	var push bytes.Buffer
	if err := r.WritePush(&push); err != nil {
		t.Fatal(err)
	}
	if err := helper.Apply(&push); err != nil {
		t.Fatal(err)
	}
	p.finish(r, helper)
	m := p.h.st.Manifests[0]
	w := p.h.dirs[0].watch
	for i := range n {
		k := filepath.ToSlash(name(i))
		e := m[k]
		want, err := hashFile(filepath.Join(p.host, name(i)))
		if i == 1 {
			want = unreadHash
			err = nil
		}
		if err != nil || e.Hash != want || e.Verified {
			t.Errorf("%s: recorded hash %q (verified %v), want %q (%v) unverified", k, e.Hash, e.Verified, want, err)
		}
		if !w.unsettled[k] {
			t.Errorf("%s: not unsettled: no later scan would read it once settled", k)
		}
	}
	if got := read(t, filepath.Join(p.sandbox, name(1))); got != "<open "+filepath.Join(p.sandbox, name(1))+": no such file or directory>" {
		t.Fatalf("the fifo packed as a deletion, the sandbox has %q", got)
	}

	// Same-size rewrites within the tick of what the scan saw, events
	// lost: d/0.go (hashed by the push) and d/1.go (back as a file with the
	// content the scan had seen).
	seen0, seen1 := m[filepath.ToSlash(name(0))], m[filepath.ToSlash(name(1))]
	os.Remove(fifo)
	put(t, filepath.Join(p.host, name(0)), "TWO, LONGER")
	put(t, fifo, "two, longer")
	w.n.take()
	defer func() { statPathFunc = nil }()
	statPathFunc = func(full string) (Entry, bool, error) {
		e, ok, err := statPath(full)
		switch {
		case !ok:
		case full == filepath.Join(p.host, name(0)):
			e.MTime, e.CTime, e.Ino = seen0.MTime, seen0.CTime, seen0.Ino
		case full == fifo:
			e.MTime, e.CTime, e.Ino = seen1.MTime, seen1.CTime, seen1.Ino
		}
		return e, ok, err
	}
	// Past the racy window: the stat alone would vouch for them now.
	if !testenv.WaitEvery(5*time.Second, 5*time.Millisecond, func() bool {
		r := racyFor(p.host, time.Now())
		return !r.racy(seen0.MTime) && !r.racy(seen1.MTime)
	}) {
		t.Fatal("the files stayed racy for 5 s")
	}
	rep := p.sync(nil)
	if got := read(t, filepath.Join(p.sandbox, name(0))); got != "TWO, LONGER" {
		t.Errorf("a same-size rewrite within the tick after the push: the sandbox has %q (pushed %d)", got, rep.Pushed)
	}
	if got := read(t, filepath.Join(p.sandbox, name(1))); got != "two, longer" {
		t.Errorf("a file the push sent as deleted, back as the scan saw it: the sandbox has %q (pushed %d)", got, rep.Pushed)
	}
}
