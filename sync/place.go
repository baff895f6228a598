package sync

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	gosync "sync"
	"sync/atomic"
)

// Placing: the first push of a new local sandbox, written by the host
// straight into the sandbox's workspace instead of streamed to the helper.
//
// A local sandbox's workspace is a host directory (the session's state
// dir) bound into the sandbox. Before the sandbox's first command nothing
// of the sandbox has run in it: the session made it empty just before the
// claim, and the sandbox's init is sbx's own code. The host can then fill
// it with plain creates, as `tar x` would, instead of packing every file
// into a tar stream that the helper unpacks through an os.Root per
// directory. What makes this safe, and where it is checked:
//
//   - Only the caller knows that no sandbox code has run yet in dst (the
//     session, right after its claim, before any command): Place is only
//     ever called there. Place itself refuses a dst that is not empty.
//   - Every write goes through an os.Root opened on dst, and only creates:
//     a directory with mkdir, a file with O_CREAT|O_EXCL|O_NOFOLLOW, a
//     symlink with symlinkat; nothing is opened that exists already, so no
//     name can redirect a write, and no write leaves dst.
//   - Only what the push holds is placed: Begin's changes, after the
//     excludes (.sbxignore, secrets never enter); a source file is opened
//     through an os.Root on the code dir with O_NOFOLLOW and placed only if
//     it is a regular file.
//   - Contents are copied, never hard-linked (a sandbox write would reach
//     the host's file); the kernel copies them (copy_file_range, a reflink
//     where the file system has them) without passing through sbx.
//   - What is placed belongs to dst's owner (the sandbox's host uid when
//     sbx runs as root), as if the sandbox had written it.
//   - The helper is told how many entries were placed (HelperDir.Placed)
//     and what they are (the placed list after the dir's empty patch, each
//     entry from the placed file's own fstat): it takes the list for its
//     manifest instead of scanning the workspace, refuses the round trip
//     when the count differs, and refuses a push that also carries items
//     for a placed dir.
//
// A Place that fails removes what it placed, and the push streams as
// before. On Linux before 5.6 (no openat2) and elsewhere, files are placed
// through os.Root, which, like WritePatch, follows a symlink inside the
// code dir at a directory of the path (a host directory swapped for a
// link since the scan is then read through: the host user's own change,
// never the sandbox's).

// placeWorkers copy files at once: enough to keep two cores busy while
// some wait on the disk.
var placeWorkers = max(4, 2*runtime.GOMAXPROCS(0))

// placeFast lets Linux place with the system calls themselves
// (place_linux.go); tests turn it off to run the portable way.
var placeFast = true

// placeCopyFrom is the first way the system calls' placing copies a file's
// bytes: 0 copy_file_range, 1 sendfile, 2 read and write (place_linux.go).
// Each falls to the next where the file systems cannot; tests start lower
// down to run each way.
var placeCopyFrom = 0

// ErrNotPlaceable is a Place refused before anything was written: the round
// is not the first of its sandbox side, or dst is not an empty directory.
var ErrNotPlaceable = errors.New("not placeable")

// Place writes code dir i's push into dst, the host directory that is the
// sandbox's workspace for it, instead of sending it on the push stream. The
// caller promises that no code of the sandbox has run in dst. On success the
// request tells the helper what was placed and WritePush sends an empty
// patch for the dir; on failure nothing of it stays in dst and the push
// streams as usual.
func (r *Round) Place(i int, dst string) error {
	if i < 0 || i >= len(r.h.dirs) || i >= len(r.Request.Dirs) {
		return fmt.Errorf("place: no code dir %d", i)
	}
	if !r.Request.Dirs[i].Reset {
		return fmt.Errorf("place %s: %w: the sandbox side has been synced before", dst, ErrNotPlaceable)
	}
	src := r.h.dirs[i].cfg.Path
	d, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("place into %s: %w", dst, err)
	}
	defer d.Close()
	s, err := os.OpenRoot(src)
	if err != nil {
		return fmt.Errorf("place from %s: %w", src, err)
	}
	defer s.Close()
	p := &placer{src: s, dst: d}
	p.openFds(src, dst)
	defer p.closeFds()
	if err := p.checkEmpty(); err != nil {
		return fmt.Errorf("place into %s: %w", dst, err)
	}
	if err := p.owner(); err != nil {
		return fmt.Errorf("place into %s: %w", dst, err)
	}
	n, err := p.place(r.changes[i])
	if err != nil {
		p.undo()
		return fmt.Errorf("place %s into %s: %w", src, dst, err)
	}
	for _, v := range p.vanished {
		// Gone from the host since the scan: not in the sandbox either.
		delete(r.cur[i], v)
	}
	if r.placed == nil {
		r.placed = make([]bool, len(r.h.dirs))
	}
	r.placed[i] = true
	if r.placedList == nil {
		r.placedList = make([]Manifest, len(r.h.dirs))
	}
	r.placedList[i] = p.placed
	r.Request.Dirs[i].Placed = n
	return nil
}

type placer struct {
	src, dst *os.Root
	// uid and gid own what is placed, when chown is set (dst is not
	// owned by this process: sbx runs as root, the sandbox as its own uid).
	uid, gid int
	chown    bool
	// srcFd and dstFd are the trees' descriptors for fastFiles (-1: the
	// portable way); noRange: copy_file_range failed between them.
	srcFd, dstFd int
	noRange      atomic.Bool
	noSendfile   atomic.Bool

	mu       gosync.Mutex
	vanished []string
	// placed is each entry written, as a scan of dst would record it
	// (the placed list the helper takes for its manifest).
	placed Manifest
}

// record adds placed entries.
func (p *placer) record(es []pathEntry) {
	p.mu.Lock()
	if p.placed == nil {
		p.placed = Manifest{}
	}
	for _, pe := range es {
		p.placed[pe.p] = pe.e
	}
	p.mu.Unlock()
}

func (p *placer) checkEmpty() error {
	f, err := p.dst.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("%w: the workspace is not empty (it holds %q)", ErrNotPlaceable, names[0])
	}
	if err != nil && err != io.EOF {
		return err
	}
	return nil
}

// place creates the directories and symlinks in order (parents first, as
// Diff lists them), then copies the files, a directory at a time per
// worker. It returns how many entries it placed.
func (p *placer) place(changes []Change) (int, error) {
	type group struct {
		dir   string
		files []Change
	}
	var (
		groups []*group
		dirs   []Change // made without their own permissions yet
		links  []Change
	)
	for _, c := range changes {
		if c.Deleted {
			return 0, fmt.Errorf("%w: a deletion (%s) in a first push", ErrNotPlaceable, c.Path)
		}
		e := c.Entry
		switch {
		case e.Mode.IsDir():
			dirs = append(dirs, c)
		case e.isLink():
			links = append(links, c)
		case e.Mode.IsRegular():
			dir := path.Dir(c.Path)
			if len(groups) == 0 || groups[len(groups)-1].dir != dir {
				groups = append(groups, &group{dir: dir})
			}
			g := groups[len(groups)-1]
			g.files = append(g.files, c)
		}
	}
	// The directories first, parents before children as Diff lists them;
	// then the symlinks (never a parent of anything in the push).
	if ok, err := p.fastDirs(dirs); err != nil {
		return 0, err
	} else if !ok {
		for _, c := range dirs {
			if err := p.dst.Mkdir(c.Path, c.Entry.Mode.Perm()|0o700); err != nil {
				return 0, err
			}
			if err := p.own(nil, c.Path, false); err != nil {
				return 0, err
			}
		}
	}
	rec := make([]pathEntry, 0, len(dirs)+len(links))
	for _, c := range links {
		if err := p.dst.Symlink(c.Entry.Link, c.Path); err != nil {
			return 0, err
		}
		if err := p.own(nil, c.Path, true); err != nil {
			return 0, err
		}
		fi, err := p.dst.Lstat(c.Path)
		if err != nil {
			return 0, err
		}
		e, _ := entryOf(fi)
		e.Link = c.Entry.Link
		rec = append(rec, pathEntry{c.Path, e})
	}
	n := len(dirs) + len(links)
	work := make(chan *group)
	var (
		wg     gosync.WaitGroup
		mu     gosync.Mutex
		first  error
		placed int
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for range min(placeWorkers, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range work {
				k, err := p.files(g.dir, g.files)
				mu.Lock()
				placed += k
				mu.Unlock()
				if err != nil {
					fail(err)
				}
			}
		}()
	}
	for _, g := range groups {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
		work <- g
	}
	close(work)
	wg.Wait()
	if first != nil {
		return 0, first
	}
	// Last, each directory's own permissions (one without the owner's
	// write bit could not have been filled).
	if ok, err := p.fastChmodDirs(dirs); err != nil {
		return 0, err
	} else if !ok {
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := p.dst.Chmod(dirs[i].Path, dirs[i].Entry.Mode.Perm()); err != nil {
				return 0, err
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		rec = append(rec, pathEntry{dirs[i].Path, Entry{Mode: fs.ModeDir | dirs[i].Entry.Mode.Perm()}})
	}
	p.record(rec)
	return n + placed, nil
}

// files copies the regular files of one directory.
func (p *placer) files(dir string, files []Change) (int, error) {
	if n, ok, err := p.fastFiles(dir, files); ok {
		return n, err
	}
	src, dst := p.src, p.dst
	if dir != "." {
		var err error
		if src, err = p.src.OpenRoot(dir); err != nil {
			if notExist(err) {
				// The directory left the host since the scan.
				p.gone(files)
				return 0, nil
			}
			return 0, err
		}
		defer src.Close()
		if dst, err = p.dst.OpenRoot(dir); err != nil {
			return 0, err
		}
		defer dst.Close()
	}
	n := 0
	rec := make([]pathEntry, 0, len(files))
	for _, c := range files {
		ok, err := p.file(src, dst, path.Base(c.Path), c.Entry)
		if err != nil {
			return n, fmt.Errorf("%s: %w", c.Path, err)
		}
		if !ok {
			p.gone([]Change{c})
			continue
		}
		fi, err := dst.Lstat(path.Base(c.Path))
		if err != nil {
			return n, fmt.Errorf("%s: %w", c.Path, err)
		}
		e, _ := entryOf(fi)
		rec = append(rec, pathEntry{c.Path, e})
		n++
	}
	p.record(rec)
	return n, nil
}

func (p *placer) gone(cs []Change) {
	p.mu.Lock()
	for _, c := range cs {
		p.vanished = append(p.vanished, c.Path)
	}
	p.mu.Unlock()
}

// file copies one file; ok is false when it is no longer a regular file on
// the host (it is then not placed, and not recorded).
func (p *placer) file(src, dst *os.Root, name string, e Entry) (ok bool, err error) {
	in, err := src.OpenFile(name, os.O_RDONLY|noFollow|noWait, 0)
	if notExist(err) || isLoop(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, nil
	}
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return false, err
	}
	err = p.own(out, "", false)
	if err == nil {
		// As WritePatch sends it: what the file holds when opened, with
		// the mtime of then (a file that shrank is shorter; the next scan
		// of either side sees any change since).
		_, err = io.CopyN(out, in, fi.Size())
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dst.Chtimes(name, fi.ModTime(), fi.ModTime())
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// undo removes everything placed: dst is the sandbox's empty workspace
// again (nothing of the sandbox has run in it).
func (p *placer) undo() {
	f, err := p.dst.Open(".")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		p.dst.RemoveAll(n)
	}
}

// isLoop: O_NOFOLLOW met a symlink (the file was replaced by one since the
// scan).
func isLoop(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && isELOOP(pe.Err)
}
