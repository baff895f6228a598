package inpod

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install copies the helper at src to dst the way the host's upload does
// (a file of its own in dst's directory, made 0755, renamed into place), so
// that a half-written helper is never at dst. dst's directory is made 0700
// when missing. It is what `sbx-inpod __inpod install` runs in the init
// container that `sbx pool render --helper-image` adds: the helper comes
// from an image instead of the claim's first exec. The host still checks
// the hash of whatever answers at dst before it uses it (StartMux), and
// uploads its own build when they differ.
func Install(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install the helper: open %s: %w", src, err)
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("install the helper: make %s: %w (is the pod's /tmp volume mounted in the init container?)", dir, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(dst)+".new.*")
	if err != nil {
		return fmt.Errorf("install the helper: %w", err)
	}
	_, err = io.Copy(f, in)
	err = errors.Join(err, f.Chmod(0o755), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("install the helper at %s: %w", dst, err)
	}
	return nil
}

// install is `__inpod install`: this executable to sandbox.HelperPath.
func install(dst string) int {
	self, err := os.Executable()
	if err == nil {
		err = Install(self, dst)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbx __inpod install:", err)
		return 1
	}
	return 0
}
