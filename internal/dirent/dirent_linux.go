//go:build linux

package dirent

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// BufSize is a good size for the buffer passed to Each: a getdents64 call
// returns about 1k entries of short names into it.
const BufSize = 32 << 10

// The layout of struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
// d_type u8, d_name (NUL-terminated, padded to 8 bytes).
const (
	offReclen = 16
	offType   = 18
	offName   = 19
)

// Each calls fn for each entry of the directory open at fd but "." and "..",
// with its name (valid only during the call, and without its NUL), a pointer
// to that name NUL-terminated (for Statx) and its d_type (unix.DT_*, DT_UNKNOWN
// on file systems that do not say). It stops at the first error of fn or of
// getdents64, and returns it. buf must hold at least one entry (BufSize).
func Each(fd int, buf []byte, fn func(name []byte, cname *byte, typ uint8) error) error {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		if err := parse(buf[:n], fn); err != nil {
			return err
		}
	}
}

// errBadRecord is a record of getdents64 that does not fit its buffer: the
// kernel never writes one.
var errBadRecord = unix.EIO

// parse calls fn for each record in b, the bytes one getdents64 call wrote.
func parse(b []byte, fn func(name []byte, cname *byte, typ uint8) error) error {
	for len(b) > 0 {
		if len(b) < offName+1 {
			return errBadRecord
		}
		reclen := int(*(*uint16)(unsafe.Pointer(&b[offReclen])))
		if reclen < offName+1 || reclen > len(b) {
			return errBadRecord
		}
		rec := b[:reclen]
		b = b[reclen:]
		name := rec[offName:]
		end := -1
		for i, c := range name {
			if c == 0 {
				end = i
				break
			}
		}
		if end <= 0 {
			return errBadRecord // no NUL, or an empty name
		}
		name = name[:end]
		if (len(name) == 1 && name[0] == '.') || (len(name) == 2 && name[0] == '.' && name[1] == '.') {
			continue
		}
		if err := fn(name, &name[0], rec[offType]); err != nil {
			return err
		}
	}
	return nil
}

// Statx stats the entry named cname (from Each) in the directory open at
// dirfd, without following a symbolic link, asking the kernel only for mask.
func Statx(dirfd int, cname *byte, mask int, st *unix.Statx_t) error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(cname)),
			uintptr(unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC|unix.AT_NO_AUTOMOUNT), uintptr(mask), uintptr(unsafe.Pointer(st)), 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// Openat opens the directory named cname in the directory open at dirfd,
// refusing a symbolic link (O_NOFOLLOW).
func Openat(dirfd int, cname *byte) (int, error) {
	for {
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(cname)),
			uintptr(unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_LARGEFILE), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(fd), nil
	}
}
