package sync

import (
	"bytes"
	"io"
	"os"
	"path"
	gosync "sync"
	"sync/atomic"
)

// The helper writes a push's small files from a few goroutines: the stream
// is read in order by one, which reads each small file's content into a
// buffer and hands the file's write (temporary name, content, mode, times,
// rename) to a worker. Everything else (a directory, a removal, a symlink,
// a conflict copy, a file over applyParMaxFile, the manifest) stays in the
// reading goroutine, after the workers have finished what they hold
// (wait), so that a directory is made before its files and removals and
// renames keep the stream's order. Bounds: applyParWorkers workers, at
// most applyParQueue files waiting, each at most applyParMaxFile bytes
// (applyParWorkers+applyParQueue+1 buffers in memory, 2.25 MiB).
const (
	applyParWorkers = 4
	applyParQueue   = 4
	applyParMaxFile = 256 << 10
)

type applyJob struct {
	r    *os.Root
	name string
	it   Item
	buf  *bytes.Buffer
	e    Entry
	err  error
	// dirfd, when not -1, is name's directory open (dirRoots.fd): the
	// write takes writeSmallAt, told whether something was at name
	// (exists), and writeItem only when that cannot do it.
	dirfd  int
	exists bool
}

// parApply is one push's workers. Its zero value is not usable: newParApply.
type parApply struct {
	jobs     chan *applyJob
	workers  gosync.WaitGroup
	pending  gosync.WaitGroup
	mu       gosync.Mutex
	done     []*applyJob
	inflight map[string]bool
	failed   atomic.Bool // a worker's write failed: stop reading
	started  bool        // the workers run (start)
}

var applyBufs = gosync.Pool{New: func() any { return new(bytes.Buffer) }}

func newParApply() *parApply {
	return &parApply{jobs: make(chan *applyJob, applyParQueue), inflight: map[string]bool{}}
}

// parWorkersStarted counts the push workers started (for tests: a push
// without a small file, a no-change round trip's, starts none).
var parWorkersStarted atomic.Int64

// start starts the workers, at the first file handed to them: a push with
// no small file (every no-change round trip's) makes no goroutine, which in
// the local worker, whose round trips run on a locked thread, would each
// cost a wake-up of another thread to start and another to stop.
func (p *parApply) start() {
	if p.started {
		return
	}
	p.started = true
	for range applyParWorkers {
		parWorkersStarted.Add(1)
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for j := range p.jobs {
				handled := false
				if j.dirfd >= 0 {
					j.e, j.err, handled = writeSmallAt(j.dirfd, j.name, &j.it, j.buf.Bytes(), j.exists)
				}
				if !handled {
					j.e, j.err = writeItem(j.r, &j.it, j.name, true)
				}
				if j.err != nil {
					p.failed.Store(true)
				}
				applyBufs.Put(j.buf)
				j.buf = nil
				p.mu.Lock()
				p.done = append(p.done, j)
				p.mu.Unlock()
				p.pending.Done()
			}
		}()
	}
}

// submitAt reads it's content and hands its write to a worker, or, for
// a file too large to hold, writes it here; it reports whether the write
// was handed on (its result then comes from wait). name's directory is
// open at dirfd (-1: not), and exists is what the caller's lstat found at
// name (see applyJob).
func (p *parApply) submitAt(r *os.Root, dirfd int, name string, it *Item, exists bool) (handed bool, e Entry, err error) {
	if it.Deleted || !it.Entry.Mode.IsRegular() || it.Entry.Size > applyParMaxFile || it.Body == nil {
		e, err = writeItem(r, it, name, true)
		return false, e, err
	}
	buf := applyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, err = buf.ReadFrom(io.LimitReader(it.Body, applyParMaxFile+1))
	if err != nil || buf.Len() > applyParMaxFile {
		// The header lied about the size, or the stream failed: here,
		// with what was read first, as writeItem would have read it.
		one := *it
		one.Body = io.MultiReader(bytes.NewReader(buf.Bytes()), it.Body)
		if err == nil {
			e, err = writeItem(r, &one, name, true)
		}
		applyBufs.Put(buf)
		return false, e, err
	}
	j := &applyJob{r: r, name: name, it: *it, buf: buf, dirfd: dirfd, exists: exists}
	j.it.Body = bytes.NewReader(buf.Bytes())
	p.start()
	p.inflight[it.Path] = true
	p.pending.Add(1)
	p.jobs <- j
	return true, Entry{}, nil
}

// wait returns once no file is being written, with the results of those
// written since the last wait, in no particular order.
func (p *parApply) wait() []*applyJob {
	p.pending.Wait()
	p.mu.Lock()
	done := p.done
	p.done = nil
	p.mu.Unlock()
	clear(p.inflight)
	return done
}

// close stops the workers, after what they hold is written; the results
// not taken yet are returned.
func (p *parApply) close() []*applyJob {
	done := p.wait()
	close(p.jobs)
	p.workers.Wait()
	return done
}

// parFile says it may go to a worker: a regular file small enough to hold.
func parFile(it *Item) bool {
	return !it.Deleted && it.Entry.Mode.IsRegular() && it.Entry.Size <= applyParMaxFile
}

// busyAt says a worker is writing at p or at a directory above it.
func (p *parApply) busyAt(q string) bool {
	if len(p.inflight) == 0 {
		return false
	}
	for {
		if p.inflight[q] {
			return true
		}
		d := path.Dir(q)
		if d == q || d == "." || d == "/" {
			return false
		}
		q = d
	}
}
