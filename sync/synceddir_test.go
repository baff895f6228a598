package sync

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSyncedDir: a code dir and the directories the sync carries in it
// are synced; an excluded one, one reached through a symlink, a file, a
// missing path and anything outside the code dirs are not.
func TestSyncedDir(t *testing.T) {
	code := t.TempDir()
	for _, d := range []string{"a/b", "node_modules/x", "real"} {
		if err := os.MkdirAll(filepath.Join(code, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(code, "f"), nil, 0o644)
	os.Symlink("real", filepath.Join(code, "link"))
	os.Symlink(filepath.Join(code, "a"), filepath.Join(code, "real", "up"))
	h, err := OpenHost(t.TempDir(), []HostDir{{Path: code, Exclude: []string{"node_modules/"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for dir, want := range map[string]bool{
		code:                                     true,
		filepath.Join(code, "a"):                 true,
		filepath.Join(code, "a", "b"):            true,
		filepath.Join(code, "node_modules"):      false,
		filepath.Join(code, "node_modules", "x"): false,
		filepath.Join(code, "link"):              false,
		filepath.Join(code, "real", "up", "b"):   false,
		filepath.Join(code, "f"):                 false,
		filepath.Join(code, "gone"):              false,
		filepath.Dir(code):                       false,
		"/tmp":                                   false,
		code + "x":                               false,
	} {
		if got := h.SyncedDir(dir); got != want {
			t.Errorf("SyncedDir(%s) = %v, want %v", dir, got, want)
		}
	}
}
