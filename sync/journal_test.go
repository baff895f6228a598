package sync

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The journal keeps each overwritten file, drops the oldest rounds past its
// cap and rounds past JournalKeep, and cleans up a round a crash left.
func TestJournalCapAgeAndCrash(t *testing.T) {
	code := t.TempDir()
	j := &Journal{Dir: t.TempDir(), Max: 250}
	root, err := os.OpenRoot(code)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// The host's own edits between rounds: each round replaces a version
	// the host had, so none is churn; the cap drops the oldest rounds and
	// says so.
	round := func(content string) {
		t.Helper()
		put(t, filepath.Join(code, "f"), content)
		now, _, _ := lstatEntry(root, "f", false)
		j.begin("pull-back")
		if _, err := j.keep(code, "f", root, "f", now, "overwritten"); err != nil {
			t.Fatal(err)
		}
		if err := j.commit(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		round(strings.Repeat(fmt.Sprint(i), 100))
	}
	rounds, _ := j.Rounds()
	if len(rounds) != 2 {
		t.Fatalf("%d rounds kept under a 250-byte cap of 100-byte files, want the newest 2", len(rounds))
	}
	blob, _ := os.ReadFile(filepath.Join(j.Dir, rounds[1].ID, rounds[1].Entries[0].Blob))
	if string(blob) != strings.Repeat("3", 100) {
		t.Fatalf("newest round holds %q", blob)
	}
	if len(j.Dropped) != 2 || !strings.Contains(j.Dropped[0], "sbx undo can no longer restore them") {
		t.Fatalf("dropped rounds not said: %q", j.Dropped)
	}
	// A file over the cap is kept: the newest round is always whole.
	put(t, filepath.Join(code, "big"), strings.Repeat("x", 300))
	now, _, _ := lstatEntry(root, "big", false)
	j.begin("pull-back")
	e, _ := j.keep(code, "big", root, "big", now, "overwritten")
	if e.Blob == "" {
		t.Fatalf("a file over the cap is not kept: %+v", e)
	}
	j.commit()
	if rounds, _ := j.Rounds(); len(rounds) != 1 || rounds[0].Entries[0].Path != "big" {
		t.Fatalf("rounds after a file over the cap: %+v", rounds)
	}
	// Old rounds and a crashed round go at the next prune.
	old := fmt.Sprintf("%020d-pull-back-10", time.Now().Add(-JournalKeep-time.Hour).UnixNano())
	os.MkdirAll(filepath.Join(j.Dir, old), 0o700)
	os.WriteFile(filepath.Join(j.Dir, old, "entries.json"), []byte(`{"entries":[]}`), 0o600)
	os.MkdirAll(filepath.Join(j.Dir, "123-pull-back.tmp"), 0o700)
	j.prune()
	for _, gone := range []string{old, "123-pull-back.tmp"} {
		if _, err := os.Stat(filepath.Join(j.Dir, gone)); err == nil {
			t.Errorf("%s survived the prune", gone)
		}
	}
}

// TestJournalChurnKeepsHostVersions: a pull-back overwrites the host's own
// notes.txt, then later pull-backs rewrite a big file again and again (its
// every kept version is one a pull-back wrote): the cap drops that churn,
// never the host's notes.txt, and says nothing (no round lost).
func TestJournalChurnKeepsHostVersions(t *testing.T) {
	code := t.TempDir()
	j := &Journal{Dir: t.TempDir(), Max: 250}
	root, err := os.OpenRoot(code)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	put(t, filepath.Join(code, "notes.txt"), "mine\n")
	pullBack := func(name, content string) {
		t.Helper()
		now, exists, _ := lstatEntry(root, name, false)
		j.begin("pull-back")
		var e *JournalEntry
		if exists {
			e, _ = j.keep(code, name, root, name, now, "overwritten")
		}
		// As the pull-back does: a new file renamed over the old.
		put(t, filepath.Join(code, name+".new"), content)
		os.Rename(filepath.Join(code, name+".new"), filepath.Join(code, name))
		after, _, _ := lstatEntry(root, name, false)
		if exists {
			j.setAfter(e, after)
		} else {
			j.created(code, name, after)
		}
		if err := j.commit(); err != nil {
			t.Fatal(err)
		}
	}
	pullBack("notes.txt", "gone\n")
	for i := 0; i < 5; i++ {
		pullBack("big", strings.Repeat(fmt.Sprint(i), 150))
	}
	rounds, _ := j.Rounds()
	if len(rounds) != 6 || len(j.Dropped) != 0 {
		t.Fatalf("%d rounds, dropped %q", len(rounds), j.Dropped)
	}
	if blob, _ := os.ReadFile(filepath.Join(j.Dir, rounds[0].ID, rounds[0].Entries[0].Blob)); string(blob) != "mine\n" {
		t.Fatalf("the host's notes.txt is not kept: %q", blob)
	}
	last := rounds[5].Entries[0]
	if blob, _ := os.ReadFile(filepath.Join(j.Dir, rounds[5].ID, last.Blob)); string(blob) != strings.Repeat("3", 150) {
		t.Fatalf("the newest round is not whole: %+v", last)
	}
	if e := rounds[4].Entries[0]; e.Blob != "" || !strings.Contains(e.NotKept, "dropped to stay under journal_size") {
		t.Fatalf("churn not dropped: %+v", e)
	}
	if res, err := j.Undo([]string{filepath.Join(code, "notes.txt")}); err != nil || read(t, filepath.Join(code, "notes.txt")) != "mine\n" {
		t.Fatalf("undo notes.txt: %+v %v", res, err)
	}
}
