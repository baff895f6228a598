//go:build linux

package sync

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"golang.org/x/sys/unix"
)

// writeSmallAt writes a push's small regular file, whose content is body,
// as name in the directory open at dirfd: the same result as writeItem's
// (a temporary name, then rename over what is there; written in place
// when nothing was there, as writeItem's direct), in about a third of
// its system calls. Everything is relative to dirfd and a single name,
// so nothing walks a path: no symlink is followed (O_NOFOLLOW on the
// final name; O_EXCL refuses anything at a temporary name), and the
// times and the entry come from the open file, not its name (writeItem
// reached them through os.Root: a readlink, a utimensat and an lstat by
// name, plus os.File's own fcntl and epoll calls at each open).
//
// exists says what the caller's lstat found at name (a directory there is
// not this path's case). When the path cannot be taken (anything at name
// that is not what exists said, a refusal the slow path knows how to
// get past, such as a read-only directory), it leaves nothing of its own
// behind and reports handled false: writeItem then does the write.
func writeSmallAt(dirfd int, name string, it *Item, body []byte, exists bool) (e Entry, err error, handled bool) {
	tmp := name
	if exists {
		tmp = tempName(name) // name has no directory: the name alone
	}
	ie := it.Entry
	perm := uint32(ie.Mode.Perm())
	// Created with its permissions when the umask leaves them whole (a
	// chmod less), as the placed first push is; else 0600 and a chmod.
	mode, chmod := uint32(0o600), true
	if um, ok := processUmask(); ok && perm&um == 0 {
		mode, chmod = perm, false
	}
	fd, err := openRetry(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return Entry{}, nil, false
	}
	fail := func() {
		unix.Close(fd)
		unix.Unlinkat(dirfd, tmp, 0)
	}
	for b := body; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			fail()
			return Entry{}, nil, false
		}
		b = b[n:]
	}
	if chmod {
		if err := unix.Fchmod(fd, perm); err != nil {
			fail()
			return Entry{}, nil, false
		}
	}
	mt := unix.NsecToTimespec(ie.MTime)
	if err := futimens(fd, mt); err != nil {
		fail()
		return Entry{}, nil, false
	}
	if tmp != name {
		if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
			fail()
			return Entry{}, nil, false
		}
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		// Written and in place: only its entry is unknown.
		return Entry{}, err, true
	}
	e = regularEntry(&st)
	// The content hash is only kept for a file whose mtime is recent (see
	// racyWindow), as writeItem keeps it.
	if ie.MTime >= time.Now().Add(-racyWindow).UnixNano() {
		sum := sha256.Sum256(body)
		e.Hash = hex.EncodeToString(sum[:16])
	}
	return e, nil, true
}
