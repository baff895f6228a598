//go:build linux

package session

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	gosync "sync"
	"sync/atomic"

	"github.com/sbx-sh/sbx/internal/dirent"
	"golang.org/x/sys/unix"
)

// diskUsage sums what the files under dir will cost the host once they come
// back, and stops early once the sum is over stop. The host writes every path
// as a file of its own, full size: so a regular file counts its length or its
// blocks, whichever is more (a sparse file is its length on the host), and
// each of its names counts (hard links come back as copies). Anything else
// counts its blocks. A directory it cannot read is an error: what it holds
// cannot be measured. Symbolic links are counted, never followed.
//
// It is a stat walk as cheap as one can be, since it runs after every command
// of a session without a watcher: duWorkers goroutines over the directories,
// each listed with getdents64 into a buffer of its walker's own and its
// entries stat'ed with statx (size, blocks and type only) through the
// directory's descriptor: no allocation per entry, one name lookup each, and
// a subdirectory opened with O_NOFOLLOW from its parent's descriptor, never
// by its path (the sandbox may swap a directory for a link meanwhile).
func diskUsage(dir string, stop int64) (int64, error) {
	w := &duWalk{stop: stop}
	err := w.run(dir)
	return w.total.Load(), err
}

// treeSize is diskUsage's walk of a host tree (smallTree's): it also counts
// the entries, and stops once they are over maxEntries; a directory it
// cannot list or search is an error, never made searchable (that is for
// the sandbox's own directories in a workspace, not the user's).
func treeSize(dir string, maxEntries, stop int64) (entries, bytes int64, err error) {
	w := &duWalk{stop: stop, maxEntries: maxEntries, bounded: true, host: true}
	err = w.run(dir)
	return w.entries.Load(), w.total.Load(), err
}

// run walks dir; the sum is in w.total (and the count in w.entries).
func (w *duWalk) run(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	var restore func()
	var st unix.Stat_t
	if err == nil && unix.Fstat(fd, &st) == nil && int(st.Uid) == euid && st.Mode&0o500 != 0o500 {
		// Readable, not searchable: its entries could not be stat'ed.
		unix.Close(fd)
		err = unix.EACCES
	}
	if errors.Is(err, unix.EACCES) && !w.host {
		fd, restore, err = openLocked(unix.AT_FDCWD, dir)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	w.cond.L = &w.mu
	w.push(&duDir{fd: fd, path: dir, restore: restore})
	n := duWorkers()
	var wg gosync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work()
		}()
	}
	wg.Wait()
	// Whatever the walk left queued (it stopped early) is closed.
	for _, d := range w.queue {
		d.release()
	}
	if w.err == errOverStop {
		w.err = nil
	}
	return w.err
}

var euid = os.Geteuid()

// openLocked opens the directory name under dirfd that this user owns but
// may not list or search (chmod 000, 0311, 0644 in the sandbox, whose files
// are this user's when sbx is not root): its owner's read and search bits
// are added for the walk, and restore takes them away. Without them the
// walk failed, and with it every later round trip of the session, whose
// changes were lost at the release. The mode is changed through an O_PATH
// descriptor of the directory itself (/proc/self/fd/N), opened without
// following a link: the sandbox swapping the name for a link meanwhile
// cannot lead the chmod to a host file. A directory of another user's is
// refused (EACCES), as before: it cannot be measured.
func openLocked(dirfd int, name string) (fd int, restore func(), err error) {
	p, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil || int(st.Uid) != euid || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o500 == 0o500 {
		unix.Close(p)
		return -1, nil, unix.EACCES
	}
	proc := "/proc/self/fd/" + strconv.Itoa(p)
	mode := st.Mode & 0o7777
	if err := unix.Chmod(proc, mode|0o500); err != nil {
		unix.Close(p)
		return -1, nil, unix.EACCES
	}
	restore = func() {
		unix.Chmod(proc, mode)
		unix.Close(p)
	}
	fd, err = unix.Open(proc, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		restore()
		return -1, nil, err
	}
	return fd, restore, nil
}

// duWorkers is how many directories the disk walk reads at once: a stat walk
// is the kernel's CPU work on a warm cache, so about the cores, and a few
// more for a cold one waiting on the disk.
func duWorkers() int { return min(16, max(4, 2*runtime.NumCPU())) }

var errOverStop = errors.New("over")

// duDir is a directory to walk: open at fd, or to be opened as name in its
// parent (which stays open until then).
type duDir struct {
	fd     int
	parent *duDir
	name   string
	path   string // of the root only; others are named from their parents on error
	refs   atomic.Int32
	// locked: a directory of this user's without its owner's read or
	// search bit (see openLocked); restore puts its mode back once the last
	// reference goes (its children are opened through it until then).
	locked  bool
	restore func()
}

// release drops one reference: the directory's walk, or a queued child's.
func (d *duDir) release() {
	for ; d != nil; d = d.parent {
		if d.refs.Add(-1) > 0 {
			return
		}
		if d.restore != nil {
			d.restore()
			d.restore = nil
		}
		if d.fd >= 0 {
			unix.Close(d.fd)
			d.fd = -1
		}
	}
}

// fullPath names d for an error.
func (d *duDir) fullPath() string {
	if d.parent == nil {
		return d.path
	}
	return d.parent.fullPath() + "/" + d.name
}

type duWalk struct {
	stop  int64
	total atomic.Int64
	// bounded: the walk counts the entries, and stops once they pass
	// maxEntries.
	bounded    bool
	maxEntries int64
	entries    atomic.Int64
	// host: a host tree, whose locked directories are errors (openLocked
	// is never used).
	host bool

	mu    gosync.Mutex
	cond  gosync.Cond
	queue []*duDir // a stack: depth first, so few directories are open at once
	busy  int      // walkers reading a directory
	err   error    // the first error, or errOverStop; the walk ends
}

// push queues d, holding a reference to it for its walk.
func (w *duWalk) push(d *duDir) {
	d.refs.Add(1)
	w.mu.Lock()
	w.queue = append(w.queue, d)
	w.mu.Unlock()
	w.cond.Signal()
}

func (w *duWalk) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.cond.Broadcast()
}

// work takes directories off the queue until the walk is over: nothing
// queued and no walker reading (which could queue more), or an error.
func (w *duWalk) work() {
	buf := make([]byte, dirent.BufSize)
	for {
		w.mu.Lock()
		for w.err == nil && len(w.queue) == 0 && w.busy > 0 {
			w.cond.Wait()
		}
		if w.err != nil || len(w.queue) == 0 {
			w.mu.Unlock()
			w.cond.Broadcast()
			return
		}
		d := w.queue[len(w.queue)-1]
		w.queue = w.queue[:len(w.queue)-1]
		w.busy++
		w.mu.Unlock()

		if err := w.dir(d, buf); err != nil {
			w.fail(err)
		}
		w.mu.Lock()
		w.busy--
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}

// dir sums the entries of d and queues its subdirectories.
func (w *duWalk) dir(d *duDir, buf []byte) error {
	defer d.release()
	if d.fd < 0 {
		cname := append([]byte(d.name), 0)
		fd, err := -1, error(unix.EACCES)
		if !d.locked || w.host {
			fd, err = dirent.Openat(d.parent.fd, &cname[0])
		}
		if errors.Is(err, unix.EACCES) && !w.host {
			fd, d.restore, err = openLocked(d.parent.fd, d.name)
		}
		if errors.Is(err, unix.ENOENT) {
			return nil // gone since its parent was listed
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: d.fullPath(), Err: err}
		}
		d.fd = fd
		// The parent's reference for this child is dropped: the child
		// needs it no more.
		p := d.parent
		d.parent = nil
		d.path = p.fullPath() + "/" + d.name
		p.release()
	}
	var st unix.Statx_t
	err := dirent.Each(d.fd, buf, func(name []byte, cname *byte, typ uint8) error {
		if err := dirent.Statx(d.fd, cname, unix.STATX_TYPE|unix.STATX_MODE|unix.STATX_UID|unix.STATX_SIZE|unix.STATX_BLOCKS, &st); err != nil {
			if err == unix.ENOENT {
				return nil // gone since the listing
			}
			// A directory listable but not searchable (mode r--): what it
			// holds cannot be measured, so it is not taken for nothing.
			return &os.PathError{Op: "stat", Path: d.fullPath() + "/" + string(name), Err: err}
		}
		if w.bounded && w.entries.Add(1) > w.maxEntries {
			return errOverStop
		}
		n := int64(st.Blocks) * 512
		mode := uint32(st.Mode) & unix.S_IFMT
		if mode == unix.S_IFREG {
			n = max(n, int64(st.Size))
		}
		if w.total.Add(n) > w.stop {
			return errOverStop
		}
		if mode == unix.S_IFDIR {
			d.refs.Add(1) // the child's, until it is opened
			w.push(&duDir{fd: -1, parent: d, name: string(name), locked: st.Mode&0o500 != 0o500 && int(st.Uid) == euid})
		}
		return nil
	})
	if err == errOverStop {
		return err
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", d.fullPath(), err)
	}
	return nil
}
