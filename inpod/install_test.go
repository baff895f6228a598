package inpod

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstall: the init container's copy lands whole, executable, in a
// private directory, replaces what was there, and leaves no temporary file;
// a failed copy leaves the old helper in place.
func TestInstall(t *testing.T) {
	d := t.TempDir()
	src := filepath.Join(d, "sbx-inpod")
	body := bytes.Repeat([]byte("helper"), 100000)
	if err := os.WriteFile(src, body, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(d, "tmp", ".sbx", "sbx")
	if err := Install(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("installed %d bytes (err %v), want the %d of the source", len(got), err, len(body))
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o755 {
		t.Errorf("helper mode %v, want 0755", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Dir(dst)); fi.Mode().Perm() != 0o700 {
		t.Errorf("run dir mode %v, want 0700", fi.Mode().Perm())
	}

	// Again over an existing helper: replaced by rename, nothing left over.
	os.WriteFile(src, []byte("v2"), 0o644)
	if err := Install(src, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "v2" {
		t.Fatalf("second install left %q", got)
	}
	ents, _ := os.ReadDir(filepath.Dir(dst))
	if len(ents) != 1 {
		t.Errorf("run dir holds %d entries, want only the helper: %v", len(ents), ents)
	}

	// A source that cannot be read keeps the installed helper.
	if err := Install(filepath.Join(d, "missing"), dst); err == nil {
		t.Fatal("install of a missing source succeeded")
	}
	if got, _ := os.ReadFile(dst); string(got) != "v2" {
		t.Fatalf("a failed install changed the helper to %q", got)
	}
}
