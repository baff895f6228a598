package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestConflictNoteNamesRealFiles: sbx exec's conflict line names the file
// and the copy that exists, in the same words as the MCP tools
// (session.ConflictNote).
func TestConflictNoteNamesRealFiles(t *testing.T) {
	w := newWorld(t)
	w.put(t, "c2.txt", "base\n")
	r := w.during(t, "cn", []string{"--keep"}, waitCmd("echo sandbox > c2.txt", "true"), func() {
		w.put(t, "c2.txt", "host\n")
	})
	defer w.sbx(t, w.code, "release", "--session", "cn")
	want := "sbx: conflict: " + filepath.Join(w.code, "c2.txt") + " changed on the host and in the sandbox; the host's version stays, the sandbox's is in " + filepath.Join(w.code, "c2.txt.sbx-conflict") + "\n"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if w.get("c2.txt.sbx-conflict") != "sandbox\n" || w.get("c2.txt") != "host\n" {
		t.Errorf("c2.txt %q, the copy %q", w.get("c2.txt"), w.get("c2.txt.sbx-conflict"))
	}
}
