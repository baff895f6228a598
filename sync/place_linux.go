package sync

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	gosync "sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The placing of files on Linux, with the system calls themselves: the
// copy is the whole cost of a first push, and os.Root and os.File spend
// about twice the calls a file needs (a poller registration per open, a
// path walk per operation). Directories are opened with openat2's
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from each tree's own descriptor: no
// symlink anywhere on the way (a host directory swapped for a link since
// the scan is not read through), and nothing outside either tree. A
// kernel without openat2 (before 5.6) takes the portable way (place.go).

// beneath opens dir under fd for use as a directory descriptor, following
// no symlink on the way.
func beneath(fd int, dir string) (int, error) {
	if dir == "." {
		return unix.Dup(fd)
	}
	for {
		n, err := unix.Openat2(fd, dir, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EINTR && err != unix.EAGAIN {
			return n, err
		}
	}
}

// fastFiles is files with the system calls. ok is false when the kernel
// lacks openat2: the caller then takes the portable way.
func (p *placer) fastFiles(dir string, files []Change) (n int, ok bool, err error) {
	if p.srcFd < 0 || p.dstFd < 0 {
		return 0, false, nil
	}
	sd, err := beneath(p.srcFd, dir)
	if err == unix.ENOSYS {
		return 0, false, nil
	}
	if err != nil {
		if err == unix.ENOENT || err == unix.ELOOP || err == unix.ENOTDIR || err == unix.EXDEV {
			// The directory left the host since the scan, or is a link
			// now: nothing of it is placed.
			p.gone(files)
			return 0, true, nil
		}
		return 0, true, fmt.Errorf("open %s on the host: %w", dir, err)
	}
	defer unix.Close(sd)
	dd, err := beneath(p.dstFd, dir)
	if err != nil {
		return 0, true, fmt.Errorf("open %s in the workspace: %w", dir, err)
	}
	defer unix.Close(dd)
	// A copy buffer only when the file systems need one, from a pool: one
	// per directory was most of a first push's allocation.
	var buf []byte
	defer func() {
		if buf != nil {
			copyBufs.Put(&buf)
		}
	}()
	rec := make([]pathEntry, 0, len(files))
	for _, c := range files {
		placed, e, err := p.fastFile(sd, dd, path.Base(c.Path), &buf)
		if err != nil {
			return n, true, fmt.Errorf("%s: %w", c.Path, err)
		}
		if !placed {
			p.gone([]Change{c})
			continue
		}
		rec = append(rec, pathEntry{c.Path, e})
		n++
	}
	p.record(rec)
	return n, true, nil
}

// fastFile places one file and returns its entry as a scan of the
// workspace would record it (the placed file's own fstat).
func (p *placer) fastFile(sd, dd int, name string, buf *[]byte) (bool, Entry, error) {
	in, err := openRetry(sd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err == unix.ENOENT || err == unix.ELOOP || err == unix.ENOTDIR || err == unix.ENXIO {
		return false, Entry{}, nil
	}
	if err != nil {
		return false, Entry{}, fmt.Errorf("open on the host: %w", err)
	}
	defer unix.Close(in)
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return false, Entry{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, Entry{}, nil
	}
	perm := st.Mode & 0o777
	// Created with its permissions when the umask leaves them whole (a
	// chmod less); else 0600 and a chmod.
	mode, chmod := uint32(0o600), true
	if um, ok := processUmask(); ok && perm&um == 0 {
		mode, chmod = perm, false
	}
	out, err := openRetry(dd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return false, Entry{}, fmt.Errorf("create in the workspace: %w", err)
	}
	err = p.fastCopy(in, out, st.Size, buf)
	if err == nil && p.chown {
		err = unix.Fchown(out, p.uid, p.gid)
	}
	if err == nil && chmod {
		err = unix.Fchmod(out, perm)
	}
	if err == nil {
		err = futimens(out, st.Mtim)
	}
	var e Entry
	if err == nil {
		var placed unix.Stat_t
		if err = unix.Fstat(out, &placed); err == nil {
			e = regularEntry(&placed)
		}
	}
	if cerr := unix.Close(out); err == nil {
		err = cerr
	}
	return err == nil, e, err
}

// fastCopy copies size bytes (fewer if the file shrank) in the kernel
// (copy_file_range, else sendfile), or through buf where the file systems
// allow neither.
func (p *placer) fastCopy(in, out int, size int64, buf *[]byte) error {
	if !p.noRange.Load() && placeCopyFrom <= 0 {
		fallback, err := inKernel(size, func(_ int64, n int) (int, error) {
			return unix.CopyFileRange(in, nil, out, nil, n, 0)
		}, func(err error) bool {
			return err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP
		})
		if !fallback {
			return err
		}
		p.noRange.Store(true) // this pair of file systems cannot
	}
	if !p.noSendfile.Load() && placeCopyFrom <= 1 {
		// Across file systems (ext4 to tmpfs): still one call a file in
		// the kernel, not a read and a write through buf.
		fallback, err := inKernel(size, func(done int64, n int) (int, error) {
			return unix.Sendfile(out, in, &done, n)
		}, func(err error) bool {
			return err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP || err == unix.EAGAIN
		})
		if !fallback {
			return err
		}
		p.noSendfile.Store(true)
	}
	left := size
	if *buf == nil {
		*buf = *copyBufs.Get().(*[]byte)
	}
	for left > 0 {
		k, err := unix.Read(in, (*buf)[:min(left, int64(len(*buf)))])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if k == 0 {
			return nil
		}
		for b := (*buf)[:k]; len(b) > 0; {
			w, err := unix.Write(out, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return fmt.Errorf("write: %w", err)
			}
			b = b[w:]
		}
		left -= int64(k)
	}
	return nil
}

// fastDirs makes dirs (parents first) with mkdirat under a descriptor of
// each one's parent, opened beneath dst without following links, instead
// of a walk of the whole path per operation. ok is false when the kernel
// lacks openat2.
func (p *placer) fastDirs(dirs []Change) (ok bool, err error) {
	if p.dstFd < 0 || len(dirs) == 0 {
		return p.dstFd >= 0, nil
	}
	parents := map[string]int{}
	defer func() {
		for _, fd := range parents {
			unix.Close(fd)
		}
	}()
	for _, c := range dirs {
		dir, name := path.Dir(c.Path), path.Base(c.Path)
		pfd, known := parents[dir]
		if !known {
			if len(parents) >= 64 {
				for _, fd := range parents {
					unix.Close(fd)
				}
				clear(parents)
			}
			if pfd, err = beneath(p.dstFd, dir); err == unix.ENOSYS {
				return false, nil
			} else if err != nil {
				return true, fmt.Errorf("open %s in the workspace: %w", dir, err)
			}
			parents[dir] = pfd
		}
		if err := unix.Mkdirat(pfd, name, uint32(c.Entry.Mode.Perm()|0o700)); err != nil {
			return true, fmt.Errorf("mkdir %s: %w", c.Path, err)
		}
		if p.chown {
			if err := unix.Fchownat(pfd, name, p.uid, p.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return true, fmt.Errorf("chown %s: %w", c.Path, err)
			}
		}
	}
	return true, nil
}

// inKernel calls call (a copy in the kernel of at most n bytes, done
// copied so far) until size bytes are copied or the source ends (it
// shrank since the fstat). fallback: the first call failed in a way
// cannot says means these file systems cannot copy so; nothing was copied.
func inKernel(size int64, call func(done int64, n int) (int, error), cannot func(error) bool) (fallback bool, err error) {
	for left := size; left > 0; {
		n, err := call(size-left, int(min(left, 1<<30)))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil && left == size && cannot(err):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("copy: %w", err)
		case n == 0:
			return false, nil
		}
		left -= int64(n)
	}
	return false, nil
}

// fastChmodDirs gives dirs (parents first, as Diff lists them) their own
// permissions, children first, each through a descriptor of the directory
// itself opened beneath dst: fchmod, instead of os.Root's walk of the whole
// path and its check for a link at the end (five or more calls a
// directory). ok is false when the kernel lacks openat2.
func (p *placer) fastChmodDirs(dirs []Change) (ok bool, err error) {
	if p.dstFd < 0 {
		return false, nil
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		fd, err := beneath(p.dstFd, dirs[i].Path)
		if err == unix.ENOSYS {
			return false, nil
		}
		if err != nil {
			return true, fmt.Errorf("open %s in the workspace: %w", dirs[i].Path, err)
		}
		err = unix.Fchmod(fd, uint32(dirs[i].Entry.Mode.Perm()))
		unix.Close(fd)
		if err != nil {
			return true, fmt.Errorf("chmod %s: %w", dirs[i].Path, err)
		}
	}
	return true, nil
}

// futimens sets fd's atime and mtime to t (utimensat with a NULL path).
func futimens(fd int, t unix.Timespec) error {
	ts := [2]unix.Timespec{t, t}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// processUmask reads the umask without changing it (umask(2) can only
// set it, for the whole process): /proc/self/status says it since Linux
// 4.7. Read once.
var processUmask = gosync.OnceValues(func() (uint32, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return uint32(n), err == nil
		}
	}
	return 0, false
})

func openRetry(dir int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openFds opens both trees' descriptors for fastFiles.
func (p *placer) openFds(src, dst string) {
	p.srcFd, p.dstFd = -1, -1
	if !placeFast {
		return
	}
	s, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	d, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		unix.Close(s)
		return
	}
	p.srcFd, p.dstFd = s, d
}

func (p *placer) closeFds() {
	for _, fd := range []int{p.srcFd, p.dstFd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
