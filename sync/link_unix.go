//go:build unix

package sync

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// linkOut hard-links name, in the directory dir, to dst outside the tree,
// without following a symlink at name, only when name is the file's one
// link: a file with another name can be written in place through that
// name, which would rewrite the version kept at dst (the caller copies).
func linkOut(dir *os.Root, name, dst string) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Nlink != 1 {
		return errors.New("the file has other names: copied, not linked")
	}
	return unix.Linkat(int(d.Fd()), name, unix.AT_FDCWD, dst, 0)
}
