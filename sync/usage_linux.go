//go:build linux

package sync

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/dirent"
)

// usageFdDepth bounds the directories the descriptor walk holds open at
// once; a subtree deeper than that is counted through the os.Root walk.
const usageFdDepth = 48

// walkAll is the full count of the whole tree (Total's): on Linux each
// directory is opened relative to its parent's descriptor, never following
// a symbolic link, and its entries are listed with getdents64 and stat'ed
// with statx relative to it (internal/dirent), instead of an os.Root
// lookup of every entry's whole path. What it counts, watches and notes is
// walk's; TestUsageWalksAgree holds the two to each other.
func (u *Usage) walkAll(r *os.Root) bool {
	fd, err := unix.Open(u.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return u.walk(r, "")
	}
	defer unix.Close(fd)
	return u.walkFd(r, fd, "", 0, make([]byte, dirent.BufSize))
}

// walkFd is walk for the directory p open at fd.
func (u *Usage) walkFd(r *os.Root, fd int, p string, depth int, buf []byte) bool {
	if err := u.n.add(p); err != nil {
		if strings.Contains(err.Error(), errWatchLimit.Error()) {
			u.off = err.Error()
		}
		return false
	}
	var subdirs []string
	var st unix.Statx_t
	const mask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_SIZE | unix.STATX_BLOCKS | unix.STATX_INO | unix.STATX_NLINK
	err := dirent.Each(fd, buf, func(name []byte, cname *byte, _ uint8) error {
		if err := dirent.Statx(fd, cname, mask, &st); err != nil {
			return nil // gone since the listing
		}
		q := string(name)
		if p != "" {
			q = p + "/" + q
		}
		typ := uint32(st.Mode) & unix.S_IFMT
		n := int64(st.Blocks) * 512
		if typ == unix.S_IFREG {
			n = max(n, int64(st.Size))
		}
		u.set(q, n)
		u.noteIno(q, typ == unix.S_IFREG && st.Nlink >= 2, st.Ino)
		if typ == unix.S_IFDIR {
			u.dirs[q] = true
			subdirs = append(subdirs, q)
		}
		return nil
	})
	if err != nil {
		return false
	}
	for _, q := range subdirs {
		if depth+1 >= usageFdDepth {
			if !u.walk(r, q) {
				return false
			}
			continue
		}
		name := q[strings.LastIndexByte(q, '/')+1:]
		cname, err := unix.BytePtrFromString(name)
		if err != nil {
			return false
		}
		sub, err := dirent.Openat(fd, cname)
		if err != nil {
			if err == unix.ENOENT {
				continue // gone since the listing, as walk takes it
			}
			return false
		}
		ok := u.walkFd(r, sub, q, depth+1, buf)
		unix.Close(sub)
		if !ok {
			return false
		}
	}
	return true
}
