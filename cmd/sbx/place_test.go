package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFirstPushPlaced: a new local sandbox's first push is written by the
// host straight into its workspace (sync.Round.Place), and the sandbox's
// command finds the tree as the streamed push left it: contents, modes and
// mtimes, every file its own to write (as root, sbx gives the sandbox a
// host uid of its own), the .sbxignore'd secret absent; what the command
// changes comes back, and a second kept command sees the host's edit.
func TestFirstPushPlaced(t *testing.T) {
	w := newWorld(t)
	os.WriteFile(filepath.Join(w.code, "a.txt"), []byte("alpha\n"), 0o644)
	os.MkdirAll(filepath.Join(w.code, "bin"), 0o755)
	os.WriteFile(filepath.Join(w.code, "bin/run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755)
	os.WriteFile(filepath.Join(w.code, ".sbxignore"), []byte("secret.env\n"), 0o644)
	os.WriteFile(filepath.Join(w.code, "secret.env"), []byte("TOKEN=x\n"), 0o600)
	old := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC)
	os.Chtimes(filepath.Join(w.code, "a.txt"), old, old)
	script := `cat a.txt; ./bin/run.sh; stat -c '%a %Y' a.txt bin/run.sh; ` +
		`test -e secret.env && echo SECRET-PRESENT; echo more >> a.txt && touch made.txt && echo wrote`
	r := w.sbxEnv(t, w.code, []string{"SBX_DEBUG=1"}, "exec", "--keep", "--session", "placed", "--", script)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "first push placed") {
		t.Fatalf("the first push was not placed:\n%s", r.stderr)
	}
	want := "alpha\nran\n644 1577934245\n755 "
	if !strings.HasPrefix(r.stdout, want) || strings.Contains(r.stdout, "SECRET-PRESENT") || !strings.HasSuffix(r.stdout, "wrote\n") {
		t.Fatalf("stdout %q, want it to start %q, end with wrote, and no secret", r.stdout, want)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "a.txt")); string(b) != "alpha\nmore\n" {
		t.Fatalf("the sandbox's edit did not come back: %q", b)
	}
	if _, err := os.Stat(filepath.Join(w.code, "made.txt")); err != nil {
		t.Fatalf("the sandbox's new file did not come back: %v", err)
	}
	os.WriteFile(filepath.Join(w.code, "bin/run.sh"), []byte("#!/bin/sh\necho host edit\n"), 0o755)
	r = w.sbxEnv(t, w.code, []string{"SBX_DEBUG=1"}, "exec", "--keep", "--session", "placed", "--", "./bin/run.sh; cat a.txt")
	if r.code != 0 || r.stdout != "host edit\nalpha\nmore\n" {
		t.Fatalf("second command: exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "first push placed") {
		t.Fatalf("a later push of the same sandbox was placed:\n%s", r.stderr)
	}
	w.sbx(t, w.code, "release", "--session", "placed")
}
