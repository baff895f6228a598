//go:build linux

package sync

import (
	"crypto/sha256"
	"io/fs"

	"golang.org/x/sys/unix"
)

// hashFile hashes the regular file at p (not following a final symbolic
// link) with the system calls themselves: an os.File costs a poller
// registration and a finalizer per file, about a third of hashing a small
// one. The open does not block (O_NONBLOCK: a file swapped for a fifo since
// the scan is refused, not waited on) and anything but a regular file is
// an error, as reading a directory is.
func hashFile(p string) (string, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", &fs.PathError{Op: "hash", Path: p, Err: unix.EINVAL}
	}
	h := sha256.New()
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	for {
		n, err := unix.Read(fd, *buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			break
		}
		h.Write((*buf)[:n])
	}
	return hashString(h), nil
}
