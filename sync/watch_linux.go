//go:build linux

package sync

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	gosync "sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The watch is raw inotify (golang.org/x/sys/unix, already a dependency),
// not fsnotify: fsnotify is not recursive either, its reads go through a
// channel per event, and it hides what a round needs to know exactly
// (IN_Q_OVERFLOW, IN_IGNORED, which watch a name belongs to); and the
// portability it brings does not help, since its macOS backend (kqueue)
// holds a descriptor per file, which a 100k-file tree cannot afford. Other
// systems keep today's full scan (watch_other.go).

const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// inotify is one inotify instance watching every directory of a tree, with
// a goroutine that reads its events as they come (so that the kernel's
// queue, fs.inotify.max_queued_events, overflows only under a burst faster
// than the reads).
type inotify struct {
	root string
	fd   int
	wake [2]int // a pipe: closing it ends the reader

	mu      gosync.Mutex
	wds     map[int32]string // watch -> directory, relative to root ("" is root)
	dirs    map[string]int32 // directory -> its watch: those whose events come
	touched map[string]bool  // paths to stat again
	broken  string           // why the next scan must be a full one
	// strict (a Usage's watch): no IN_EXCL_UNLINK, and a write to a name
	// that is gone by the next take (an unlinked file written through a
	// descriptor, whose other names no event names) is listed in written.
	strict  bool
	written map[string]bool
	// the bounds, as they were when it was made (tests lower them)
	maxWatches, maxTouched int
	dead                   bool // the reader has ended
	done                   chan struct{}
}

// maxWatches bounds the directories one watch follows (each an inotify
// watch, ~1 KiB of kernel memory, counted against the user's
// fs.inotify.max_user_watches): past it, watching stops for good and every
// scan is a full one, so a tree (or a sandboxed command making directories)
// cannot use up the budget other programs of the user need.
var maxWatches = 65536

// maxTouched bounds the paths one round's events may name: past it they are
// forgotten and the next scan is a full one (a command that rewrote a whole
// tree costs a scan, not a map of every path).
var maxTouched = 1 << 18

// inotifyInit1 is unix.InotifyInit1 (a test makes it fail).
var inotifyInit1 = unix.InotifyInit1

func newInotify(root string) (*inotify, error) { return newInotifyMode(root, false) }

func newInotifyMode(root string, strict bool) (*inotify, error) {
	fd, err := inotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	n := &inotify{root: root, fd: fd, wds: map[int32]string{}, dirs: map[string]int32{}, touched: map[string]bool{}, done: make(chan struct{}), strict: strict, written: map[string]bool{}, maxWatches: maxWatches, maxTouched: maxTouched}
	if err := unix.Pipe2(n.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pipe2: %w", err)
	}
	go n.read()
	return n, nil
}

// add watches the directory rel (before the walk reads it, so that nothing
// written after the read goes unseen).
func (n *inotify) add(rel string) error {
	full := n.root
	if rel != "" {
		full = filepath.Join(n.root, filepath.FromSlash(rel))
	}
	n.mu.Lock()
	many := len(n.dirs) >= n.maxWatches
	n.mu.Unlock()
	if many {
		return fmt.Errorf("%w: %s has more than %d directories; full scans are used instead", errWatchLimit, n.root, n.maxWatches)
	}
	mask := uint32(watchMask)
	if n.strict {
		mask &^= unix.IN_EXCL_UNLINK
	}
	wd, err := unix.InotifyAddWatch(n.fd, full, mask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("%w: watch %s: the inotify watch limit is reached (fs.inotify.max_user_watches); full scans are used instead", errWatchLimit, full)
		}
		return fmt.Errorf("watch %s: %w", full, err)
	}
	n.mu.Lock()
	if old, ok := n.wds[int32(wd)]; ok && old != rel && n.dirs[old] == int32(wd) {
		delete(n.dirs, old)
	}
	n.wds[int32(wd)] = rel
	n.dirs[rel] = int32(wd)
	n.mu.Unlock()
	return nil
}

// watched reports whether the directory rel has a watch: one the manifest
// knows but that never had one (made by the sync itself, or restored by an
// undo) is walked again, since no event of what happens in it would come.
func (n *inotify) watched(rel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.dirs[rel]
	return ok
}

func (n *inotify) read() {
	defer close(n.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}, {Fd: int32(n.wake[0]), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			n.fail("poll the inotify queue: " + err.Error())
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		n.mu.Lock()
		err := n.drainLocked(buf)
		n.mu.Unlock()
		if err != nil {
			n.fail(err.Error())
			return
		}
		// Events come in bursts (a push's files, a build's): they gather
		// in the queue for a moment before the next read, instead of a
		// wake-up, a poll and two reads for every few of them (half of
		// what a watching process spent on a push of 1,000 files). Nothing
		// waits on this reader: take and pending read the queue
		// themselves. It only keeps the queue from overflowing, which a
		// pause of drainPause cannot make it do (fs.inotify.
		// max_queued_events is 16,384 by default: that many events in
		// drainPause is millions a second); an overflow anyway is a full
		// scan, as always.
		if _, err := unix.Poll(fds[1:], drainPause); err != nil && err != unix.EINTR {
			n.fail("poll the inotify queue: " + err.Error())
			return
		}
		if fds[1].Revents != 0 {
			return
		}
	}
}

// drainPause is how long, in milliseconds, the reader lets events gather
// after a read.
const drainPause = 5

func (n *inotify) fail(why string) {
	n.mu.Lock()
	n.dead = true
	if n.broken == "" {
		n.broken = "the watcher stopped: " + why
	}
	n.mu.Unlock()
}

// drainBufs are the queue's read buffers for take and pending. As a local
// array a 64 KiB buffer lives on the stack: the goroutine of each round
// trip (in sbx-mcp, a new one for each MCP call) grew its stack to 128 KiB
// to read an empty queue, a new stack and a copy each time.
var drainBufs = gosync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// drainPooled is drainLocked with a pooled buffer.
func (n *inotify) drainPooled() error {
	b := drainBufs.Get().(*[]byte)
	defer drainBufs.Put(b)
	return n.drainLocked(*b)
}

// drainLocked reads every queued event. Events are queued by the system
// call that caused them, before it returns: once the queue reads empty,
// every change made before the call is in touched.
func (n *inotify) drainLocked(buf []byte) error {
	for {
		k, err := unix.Read(n.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the inotify queue: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > k {
				break
			}
			name := string(buf[off+unix.SizeofInotifyEvent : end])
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			n.eventLocked(ev.Wd, ev.Mask, name)
			off = end
		}
	}
}

func (n *inotify) eventLocked(wd int32, mask uint32, name string) {
	watchEvents.Add(1)
	if mask&unix.IN_Q_OVERFLOW != 0 {
		n.breakLocked("the inotify queue overflowed")
		return
	}
	dir, ok := n.wds[wd]
	if mask&unix.IN_IGNORED != 0 {
		delete(n.wds, wd)
		if ok && n.dirs[dir] == wd {
			delete(n.dirs, dir)
		}
		return
	}
	if !ok {
		return // a watch removed since
	}
	switch {
	case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
		if dir == "" {
			n.breakLocked("the code dir itself was removed or moved")
			return
		}
		// Its parent's event names it too.
		n.touched[dir] = true
	case mask&unix.IN_ISDIR != 0 && mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0:
		// The watches below a moved directory keep their old names.
		n.breakLocked("a directory was renamed")
	default:
		p := name
		if dir != "" {
			p = path.Join(dir, name)
		}
		if name == "" {
			p = dir
		}
		if p != "" {
			n.touched[p] = true
			switch {
			case !n.strict:
			case mask&unix.IN_MODIFY != 0:
				n.written[p] = true
			case mask&unix.IN_MOVED_FROM != 0:
				// Renamed, not unlinked (a temporary name put in place):
				// its new name has an event of its own.
				delete(n.written, p)
			}
		}
		if len(n.touched) > n.maxTouched {
			n.breakLocked(fmt.Sprintf("more than %d paths changed", n.maxTouched))
		}
	}
}

func (n *inotify) breakLocked(why string) {
	if n.broken == "" {
		n.broken = why
	}
	clear(n.touched)
	clear(n.written)
}

// take returns the paths touched since the last take, or why a full scan
// is needed instead.
func (n *inotify) take() (map[string]bool, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.dead {
		if err := n.drainPooled(); err != nil {
			n.breakLocked(err.Error())
		}
	}
	if n.broken != "" {
		return nil, n.broken
	}
	t := n.touched
	n.touched = map[string]bool{}
	return t, ""
}

// takeWritten returns the paths written since the last call (strict only).
func (n *inotify) takeWritten() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.written
	n.written = map[string]bool{}
	return w
}

// pending is a copy of the paths touched since the last take (the queue
// read first), or broken when the next scan is a full one.
func (n *inotify) pending() (map[string]bool, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.dead {
		if err := n.drainPooled(); err != nil {
			n.breakLocked(err.Error())
		}
	}
	if n.broken != "" {
		return nil, true
	}
	out := make(map[string]bool, len(n.touched))
	for p := range n.touched {
		out[p] = true
	}
	return out, false
}

// touch adds paths to the next take (a round that did not finish).
func (n *inotify) touch(paths []string) {
	n.mu.Lock()
	for _, p := range paths {
		n.touched[p] = true
	}
	n.mu.Unlock()
}

// kill stops the reader as a crash would (tests): the next take says so.
func (n *inotify) kill() {
	n.close()
	n.fail("killed")
}

// overflow makes the next take find the queue overflowed (tests).
func (n *inotify) overflow() {
	n.mu.Lock()
	n.breakLocked("the inotify queue overflowed")
	n.mu.Unlock()
}

func (n *inotify) close() {
	n.mu.Lock()
	if n.wake[1] >= 0 {
		unix.Close(n.wake[1])
		n.wake[1] = -1
	}
	n.mu.Unlock()
	<-n.done
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fd >= 0 {
		unix.Close(n.fd)
		unix.Close(n.wake[0])
		n.fd = -1
	}
}

const watchSupported = true
