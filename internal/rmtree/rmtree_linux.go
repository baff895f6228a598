//go:build linux

package rmtree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxDepth is how many directories below the top the removal descends
// (one descriptor each); a directory deeper is moved up to the top.
const MaxDepth = 64

// bufSize is getdents64's buffer: about a thousand short names.
const bufSize = 32 << 10

// Path removes p and everything below it; p itself is removed, never what
// it names when it is a link. A p that is not there is no error.
func Path(p string) error {
	p = filepath.Clean(p)
	dir, name := filepath.Split(p)
	if dir == "" {
		dir = "."
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return Beneath(fd, name)
}

// Beneath removes the entry name of the directory open at dirfd and
// everything below it, never leaving dirfd (name is one component).
// What cannot be removed is left and the first error returned.
func Beneath(dirfd int, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return &os.PathError{Op: "remove", Path: name, Err: unix.EINVAL}
	}
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !isDirAt(dirfd, name) {
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	top, err := openDir(dirfd, name)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	r := &remover{top: top, buf: make([]byte, bufSize)}
	r.empty(top, name, 0)
	unix.Close(top)
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if r.err != nil {
			return r.err
		}
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	return nil
}

type remover struct {
	top   int    // the directory being emptied, where deep ones are moved
	moved int    // names given to moved directories so far
	buf   []byte // getdents64's, shared by every level
	err   error  // the first failure
}

func (r *remover) fail(path string, op string, err error) {
	if r.err == nil {
		r.err = &os.PathError{Op: op, Path: path, Err: err}
	}
}

// empty removes every entry of the directory open at fd (at depth below
// the top; path names it in errors), one getdents64 buffer of names at a
// time: memory stays that buffer's and its names' (a directory of millions
// of entries is read a batch at a time, not whole). After a batch that
// removed or moved something the directory is read again from its start
// (a removal while it is read could make a file system skip entries, and
// a moved directory lands in the top); it is done once a read through it
// all removes nothing.
func (r *remover) empty(fd int, path string, depth int) {
	for {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			r.fail(path, "seek", err)
			return
		}
		progress := false
		for !progress {
			n, err := unix.Getdents(fd, r.buf)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				r.fail(path, "readdir", err)
				return
			}
			if n <= 0 {
				break
			}
			// Names are copied out of the buffer, which the directories
			// below reuse.
			_, _, names := unix.ParseDirent(r.buf[:n], -1, nil)
			for _, name := range names {
				if r.removeEntry(fd, name, path, depth) {
					progress = true
				}
			}
		}
		if !progress {
			return
		}
	}
}

// removeEntry removes fd's entry n and all below it; false when nothing
// was removed or moved.
func (r *remover) removeEntry(fd int, n, parent string, depth int) bool {
	path := parent + "/" + n
	err := unix.Unlinkat(fd, n, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return err == nil
	}
	if !isDirAt(fd, n) {
		r.fail(path, "unlinkat", err)
		return false
	}
	if depth+1 >= MaxDepth {
		// Deep enough: up to the top, to be emptied from there (a rename
		// of the directory itself needs its owner's write bit, for its
		// "..").
		if err := r.moveUp(fd, n); err == nil {
			return true
		}
	}
	cfd, err := openDir(fd, n)
	if err != nil {
		r.fail(path, "open", err)
		return false
	}
	r.empty(cfd, path, depth+1)
	unix.Close(cfd)
	if err := unix.Unlinkat(fd, n, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		r.fail(path, "unlinkat", err)
		return false
	}
	return true
}

func (r *remover) moveUp(fd int, n string) error {
	cfd, err := openDir(fd, n) // its mode made u+rwx
	if err != nil {
		return err
	}
	unix.Close(cfd)
	for {
		r.moved++
		err := unix.Renameat2(fd, n, r.top, ".rmtree."+strconv.Itoa(r.moved), unix.RENAME_NOREPLACE)
		if !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
}

// isDirAt says whether dirfd's entry name is a directory, not following a
// link.
func isDirAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// openDir opens dirfd's directory name for reading, not following a link,
// with its owner's read, write and search bits added when it lacks them (a
// directory made unreadable or read-only). One it cannot open so is made
// readable through a descriptor of the directory itself (O_PATH,
// /proc/self/fd/N): a link swapped in for the name never leads the chmod
// elsewhere.
func openDir(dirfd int, name string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if errors.Is(err, unix.EACCES) {
		fd, err = openLocked(dirfd, name)
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&0o700 != 0o700 {
		if err := unix.Fchmod(fd, (st.Mode&0o7777)|0o700); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("make it its owner's to empty: %w", err)
		}
	}
	return fd, nil
}

// openLocked opens a directory its owner may not read or search: its
// owner's bits added first, on its O_PATH descriptor.
func openLocked(dirfd int, name string) (int, error) {
	p, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, unix.ENOTDIR
	}
	proc := "/proc/self/fd/" + strconv.Itoa(p)
	if err := unix.Chmod(proc, (st.Mode&0o7777)|0o700); err != nil {
		return -1, fmt.Errorf("make it its owner's to empty: %w", err)
	}
	return unix.Open(proc, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}
