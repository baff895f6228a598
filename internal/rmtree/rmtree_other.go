//go:build !linux

package rmtree

import (
	"errors"
	"io/fs"
	"os"
)

// Path removes p and everything below it; p itself is removed, never what
// it names when it is a link. A p that is not there is no error. Here
// (not Linux: no local sandbox writes such a tree) the directories are
// made writable through an os.Root, then os.RemoveAll removes them.
func Path(p string) error {
	if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
		return os.Remove(p)
	}
	r, err := os.OpenRoot(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fs.WalkDir(r.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			r.Chmod(path, 0o755)
		}
		return nil
	})
	r.Close()
	return os.RemoveAll(p)
}
