package regfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRead: a regular file is read, through a link when asked; a link is
// refused when not; a device (/dev/zero, read without end by os.ReadFile),
// a file over Max and a directory are refused; a missing file says so.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("a\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, Max+1), 0o644)
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)

	if b, err := Read(small, false); err != nil || string(b) != "a\n" {
		t.Fatalf("regular file: %q %v", b, err)
	}
	if b, err := Read(link, true); err != nil || string(b) != "a\n" {
		t.Fatalf("link followed: %q %v", b, err)
	}
	if _, err := Read(link, false); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("link not to be followed: %v", err)
	}
	if _, err := Read(zero, true); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("/dev/zero: %v", err)
	}
	if _, err := Read(big, true); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("over Max: %v", err)
	}
	if _, err := Read(dir, true); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("a directory: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
