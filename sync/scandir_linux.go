//go:build linux

package sync

import (
	"io/fs"
	"os"
	gosync "sync"
	"unsafe"

	"github.com/sbx-sh/sbx/internal/dirent"
	"golang.org/x/sys/unix"
)

// direntBufs are the walkers' getdents64 buffers, reused across directories.
var direntBufs = gosync.Pool{New: func() any { b := make([]byte, dirent.BufSize); return &b }}

// scanMask is what the scan needs of each entry, and all it asks the kernel.
const scanMask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_SIZE | unix.STATX_MTIME | unix.STATX_CTIME | unix.STATX_INO

// readDir lists the directory at full with getdents64 into a reused buffer
// and stats each entry with statx relative to the open directory, passing
// the name where the kernel wrote it: one name lookup per entry instead of a
// walk of its whole path, one allocation per entry (its name), and no
// registration of the directory with the runtime's poller (os.Open tries,
// and fails, for every directory).
func readDir(full string) ([]dirEntry, error) {
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	defer unix.Close(fd)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	var (
		out  []dirEntry
		st   unix.Statx_t
		link []byte
	)
	err = dirent.Each(fd, *bp, func(name []byte, cname *byte, _ uint8) error {
		if dirent.Statx(fd, cname, scanMask, &st) != nil {
			return nil // gone since the listing
		}
		var e Entry
		perm := fs.FileMode(st.Mode & 0o777)
		switch uint32(st.Mode) & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Mode = fs.ModeDir | perm
		case unix.S_IFLNK:
			e.Mode = fs.ModeSymlink | perm
			if e.Link = linkTarget(fd, cname, &link); e.Link == "" {
				return nil // unreadable or gone
			}
		case unix.S_IFREG:
			e.Mode = perm
			e.Size = int64(st.Size)
			e.MTime = st.Mtime.Sec*1e9 + int64(st.Mtime.Nsec)
			e.CTime = st.Ctime.Sec*1e9 + int64(st.Ctime.Nsec)
			e.Ino = st.Ino
		default:
			return nil // sockets, devices, fifos are never synced
		}
		out = append(out, dirEntry{name: string(name), e: e})
		return nil
	})
	if err != nil {
		return nil, &os.PathError{Op: "readdirent", Path: full, Err: err}
	}
	return out, nil
}

// linkTarget is the target of the link named cname in the directory open
// at dirfd, read into *buf (made, or grown, as needed); "" when it cannot
// be read (gone, or no longer a link).
func linkTarget(dirfd int, cname *byte, buf *[]byte) string {
	if *buf == nil {
		*buf = make([]byte, 256)
	}
	for {
		n := readlinkat(dirfd, cname, *buf)
		if n == len(*buf) {
			*buf = make([]byte, 2*len(*buf))
			continue
		}
		if n > 0 {
			return string((*buf)[:n])
		}
		return ""
	}
}

// readlinkat reads the link named cname in the directory open at dirfd into
// buf; -1 on an error.
func readlinkat(dirfd int, cname *byte, buf []byte) int {
	n, _, e := unix.Syscall6(unix.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(cname)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if e != 0 {
		return -1
	}
	return int(n)
}
