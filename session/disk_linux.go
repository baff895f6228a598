//go:build linux

package session

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// diskUsage sums what the files under dir will cost the host once they come
// back, and stops early once the sum is over stop. The host writes every path
// as a file of its own, full size: so a regular file counts its length or its
// blocks, whichever is more (a sparse file is its length on the host), and
// each of its names counts (hard links come back as copies). Anything else
// counts its blocks. Each directory is
// listed and its entries stat'ed through its open descriptor (one name
// lookup each, as the sync's scanner does). A directory it cannot read is
// an error: what it holds cannot be measured.
func diskUsage(dir string, stop int64) (int64, error) {
	w := duWalk{stop: stop}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	err = w.dir(fd, dir)
	if err == errOverStop {
		err = nil
	}
	return w.total, err
}

var errOverStop = errors.New("over")

type duWalk struct {
	stop, total int64
}

// dir sums the directory open at fd (and closes it).
func (w *duWalk) dir(fd int, path string) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", path, err)
	}
	var st unix.Stat_t
	for _, name := range names {
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since the listing
		}
		n := st.Blocks * 512
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			n = max(n, st.Size)
		}
		w.total += n
		if w.total > w.stop {
			return errOverStop
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return &os.PathError{Op: "open", Path: path + "/" + name, Err: err}
			}
			if err := w.dir(sub, path+"/"+name); err != nil {
				return err
			}
		}
	}
	return nil
}
