//go:build linux

package sync

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// readDir lists the directory at full and lstats each entry relative to
// the open directory: one name lookup per entry instead of a walk of its
// whole path, and no registration of the directory with the runtime's
// poller (os.Open tries, and fails, for every directory).
func readDir(full string) ([]dirEntry, error) {
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirEntry, 0, len(names))
	var st unix.Stat_t
	buf := make([]byte, 256)
	for _, name := range names {
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since the listing
		}
		var e Entry
		perm := fs.FileMode(st.Mode & 0o777)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Mode = fs.ModeDir | perm
		case unix.S_IFLNK:
			e.Mode = fs.ModeSymlink | perm
			for {
				n, err := unix.Readlinkat(fd, name, buf)
				if err != nil {
					n = -1
				} else if n == len(buf) {
					buf = make([]byte, 2*len(buf))
					continue
				}
				if n >= 0 {
					e.Link = string(buf[:n])
				}
				break
			}
			if e.Link == "" {
				continue // unreadable or gone
			}
		case unix.S_IFREG:
			e.Mode = perm
			e.Size = st.Size
			e.MTime = st.Mtim.Sec*1e9 + st.Mtim.Nsec
			e.CTime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
			e.Ino = st.Ino
		default:
			continue // sockets, devices, fifos are never synced
		}
		out = append(out, dirEntry{name: name, e: e})
	}
	return out, nil
}
