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
	// A file over the cap is recorded, not kept.
	put(t, filepath.Join(code, "big"), strings.Repeat("x", 300))
	now, _, _ := lstatEntry(root, "big", false)
	j.begin("pull-back")
	e, _ := j.keep(code, "big", root, "big", now, "overwritten")
	if e.Blob != "" || !strings.Contains(e.NotKept, "over the journal's 250-byte cap") {
		t.Fatalf("entry of a file over the cap: %+v", e)
	}
	j.commit()
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
