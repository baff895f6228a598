//go:build linux

package sync

import (
	"archive/tar"
	"io"
	"io/fs"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// packFileAt writes the tar entry of the regular file p (its header h,
// filled in here from the open file, through tw, and its content through
// out) as writeFile does,
// opening it relative to its directory's descriptor (dirs.fd) with the
// system calls themselves: os.Root's OpenFile walks every directory of
// the path again for each file (an openat and a close each), and an
// os.File adds a poller registration and fcntl calls. handled is false
// when it did nothing and writeFile's own way is to be taken (the
// directory could not be opened, or the open failed other than for a
// file that is gone).
func packFileAt(tw *tar.Writer, out io.Writer, dirs *dirRoots, p string, h *tar.Header) (handled bool, err error) {
	dirfd := dirs.fd(path.Dir(p))
	if dirfd < 0 {
		return false, nil
	}
	fd, err := openRetry(dirfd, path.Base(p), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err == unix.ENOENT {
		return true, tw.WriteHeader(deletedHeader(p))
	}
	if err != nil {
		return false, nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return true, tw.WriteHeader(deletedHeader(p))
	}
	h.Typeflag, h.Size, h.ModTime = tar.TypeReg, st.Size, time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	h.Mode = int64(st.Mode & 0o777)
	if err := tw.WriteHeader(h); err != nil {
		return true, err
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	left := st.Size
	for left > 0 {
		b := *buf
		if int64(len(b)) > left {
			b = b[:left]
		}
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true, &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			// Shrunk while we read: pad; the next sync sends the file again.
			_, err := io.CopyN(out, zeroReader{}, left)
			return true, err
		}
		if _, err := out.Write(b[:n]); err != nil {
			return true, err
		}
		left -= int64(n)
	}
	return true, nil
}
