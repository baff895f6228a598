//go:build linux

package sync

import (
	"io/fs"
	"path"

	"golang.org/x/sys/unix"
)

// statCache stats the paths an incremental scan looks at relative to their
// directory's descriptor, each directory opened once (the scan takes its
// paths parents first, so a directory's come together): statPath's
// os.Lstat of the full path walks every directory of it again, which was
// most of the scan after a push of 1,000 files (the files and their
// temporary names, by their events). A directory is opened without
// following a link (O_NOFOLLOW): a path below a link is gone, as the scan
// takes it anyway (its parent, looked at first, is no directory).
type statCache struct {
	root string
	fds  map[string]int
}

func newStatCache(root string) *statCache { return &statCache{root: root, fds: map[string]int{}} }

// dir returns a descriptor of the directory d ("." the root), or the
// error of opening it.
func (c *statCache) dir(d string) (int, error) {
	if fd, ok := c.fds[d]; ok {
		return fd, nil
	}
	var fd int
	var err error
	if d == "." {
		fd, err = openRetry(unix.AT_FDCWD, c.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		var parent int
		if parent, err = c.dir(path.Dir(d)); err != nil {
			return -1, err
		}
		fd, err = openRetry(parent, path.Base(d), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, err
	}
	c.fds[d] = fd
	return fd, nil
}

// stat is statPath of root/p.
func (c *statCache) stat(p string) (Entry, bool, error) {
	dfd, err := c.dir(path.Dir(p))
	if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, &fs.PathError{Op: "open", Path: path.Dir(p), Err: err}
	}
	name := path.Base(p)
	var st unix.Stat_t
	for {
		err = unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	perm := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return regularEntry(&st), true, nil
	case unix.S_IFDIR:
		return Entry{Mode: fs.ModeDir | perm}, true, nil
	case unix.S_IFLNK:
		cname, err := unix.BytePtrFromString(name)
		if err != nil {
			return Entry{}, false, nil
		}
		var buf []byte
		if link := linkTarget(dfd, cname, &buf); link != "" {
			return Entry{Mode: fs.ModeSymlink | perm, Link: link}, true, nil
		}
	}
	return Entry{}, false, nil
}

// close closes the directories opened.
func (c *statCache) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
}
