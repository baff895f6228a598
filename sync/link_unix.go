//go:build unix

package sync

import (
	"os"

	"golang.org/x/sys/unix"
)

// linkOut hard-links name, in the directory dir, to dst outside the tree,
// without following a symlink at name.
func linkOut(dir *os.Root, name, dst string) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Linkat(int(d.Fd()), name, unix.AT_FDCWD, dst, 0)
}
