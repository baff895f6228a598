//go:build linux

package session

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// diskUsage sums the blocks the files under dir take (a file with several
// links once), and stops early once the sum is over stop. Each directory is
// listed and its entries stat'ed through its open descriptor (one name
// lookup each, as the sync's scanner does). A directory it cannot read is
// an error: what it holds cannot be measured.
func diskUsage(dir string, stop int64) (int64, error) {
	w := duWalk{stop: stop, seen: map[uint64]bool{}}
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
	seen        map[uint64]bool
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
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if w.seen[st.Ino] {
				continue
			}
			w.seen[st.Ino] = true
		}
		w.total += st.Blocks * 512
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
