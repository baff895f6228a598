package sync

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"
)

// Entry is what a manifest records of one path.
type Entry struct {
	Mode  fs.FileMode `json:"m"` // type bits and permissions
	Size  int64       `json:"s,omitempty"`
	MTime int64       `json:"t,omitempty"` // nanoseconds since the epoch
	CTime int64       `json:"c,omitempty"` // change time, nanoseconds
	Ino   uint64      `json:"i,omitempty"`
	Link  string      `json:"l,omitempty"` // symlink target
	// Hash is the content's hash, recorded when size and mtime alone could
	// miss a later change (the file was modified within racyWindow of the
	// scan, or changed identity).
	Hash string `json:"h,omitempty"`
	// Verified says Hash was read from the file by a scan that found it no
	// longer racy: a later change would show in its size, mtime or ctime,
	// so later scans carry Hash over without reading the file. A hash taken
	// while the file was racy (or computed as sbx wrote it) is read once
	// more by the first scan that finds the file settled. Same ignores it.
	Verified bool `json:"v,omitempty"`
}

// Manifest maps slash-separated paths relative to a tree's root to entries.
type Manifest map[string]Entry

func (e Entry) isLink() bool { return e.Mode&fs.ModeSymlink != 0 }

// Same reports whether two entries describe the same content. It is
// conservative: when in doubt, they differ (and the file travels).
func (e Entry) Same(o Entry) bool {
	if e.Mode != o.Mode {
		return false
	}
	switch {
	case e.Mode.IsDir():
		return true
	case e.isLink():
		return e.Link == o.Link
	}
	if e.Size != o.Size || e.MTime != o.MTime {
		return false
	}
	if e.Hash != "" || o.Hash != "" {
		return e.Hash == o.Hash
	}
	if (e.Ino != 0 && o.Ino != 0 && e.Ino != o.Ino) || (e.CTime != 0 && o.CTime != 0 && e.CTime != o.CTime) {
		return false
	}
	return true
}

// racyWindow: a file whose mtime is this close to the scan may still change
// without its size or mtime showing it (timestamps are coarse), so its content
// is hashed. It is the window of a file system not known to keep fine
// timestamps; racyFor shortens it to fineRacyWindow where they are.
const racyWindow = 2 * time.Second

// Scanner walks a tree in parallel and builds its manifest.
type Scanner struct {
	Exclude *Matcher
	// Workers is how many directories are read at once; zero means a default.
	Workers int
	// Settled counts, after Scan, the hashes it read from files no longer
	// racy (Verified): worth saving, since later scans then need not read
	// those files again.
	Settled int
	// Skipped lists, after Scan, what the walk could not read (a directory
	// it cannot open, a path longer than PATH_MAX): left out of the sync,
	// with the reason. What the last sync knew below a directory it cannot
	// open is kept as it was (not taken for deleted).
	Skipped []Skip
	// Track asks Scan to list, in Changed, every path whose entry may differ
	// from the last sync's manifest it was given (a superset: the files it
	// hashed are listed whether or not their entries changed), and the
	// paths that manifest has and the scan did not find: what a caller
	// compares instead of both manifests whole (DiffOver; the host's state
	// log), 30-40 ms at 100k entries.
	Track   bool
	Changed []string
	// DeferHash lets an incremental scan (Update with a watch) leave
	// unread the racy files whose stat already shows a change from the
	// manifest: they travel whatever their hash says, and the push reads
	// them anyway. It lists them in Deferred with no hash in their
	// entries, and keeps them unsettled; the caller records the hash of
	// what the push sent (Round.Finish: unreadHash where it sent none).
	DeferHash bool
	Deferred  []string

	// watch, when set, is armed as the walk goes (Update): each directory
	// is watched before it is read. watchErr is the first watch that
	// could not be added.
	watch    *Watch
	watchErr error
}

// Skip is a path the scan left out, and why.
type Skip struct {
	Path   string
	Reason string
}

// maxFullPath is the longest absolute path the walk opens or records
// (PATH_MAX less its NUL): a longer one cannot be opened by its name on
// either side, nor sent (MaxPathBytes).
const maxFullPath = 4095

// Scan walks root. prev, the manifest of the last sync, tells which files
// need hashing: those whose size and mtime match prev but whose identity
// changed or that were racy then, and those racy now.
func (s *Scanner) Scan(root string, prev Manifest) (Manifest, error) {
	return s.finish(s.walk(root, len(prev)), prev)
}

// walk reads the tree at root into a walker, without the last sync's
// manifest (finish takes it): sized for about size entries.
func (s *Scanner) walk(root string, size int) *walker {
	start := time.Now()
	workers := s.Workers
	if workers <= 0 {
		workers = max(8, 4*runtime.NumCPU())
	}
	// Sized for the last sync's tree: growing a map of 100k entries costs
	// more than the walk's lstats.
	w := &walker{root: root, ex: s.Exclude, out: make(Manifest, size), sem: make(chan struct{}, workers), watch: s.watch, start: start, workers: workers}
	w.wg.Add(1)
	w.dir("")
	w.wg.Wait()
	return w
}

// finish makes the manifest of a walk: what prev knew below a directory
// the walk could not read stays as it was, and the files that need it are
// hashed.
func (s *Scanner) finish(w *walker, prev Manifest) (Manifest, error) {
	s.watchErr = w.watchErr
	if w.err != nil {
		return nil, w.err
	}
	for _, rel := range w.unreadable {
		for p, e := range prev {
			if strings.HasPrefix(p, rel+"/") {
				w.out[p] = e
			}
		}
	}
	sort.Slice(w.skipped, func(a, b int) bool { return w.skipped[a].Path < w.skipped[b].Path })
	s.Skipped = w.skipped
	racy := racyFor(w.root, w.start)
	var toHash, changed []string
	matched := 0
	for p, e := range w.out {
		var o Entry
		had := false
		if s.Track {
			if o, had = prev[p]; had {
				matched++
			}
		}
		if !e.Mode.IsRegular() {
			if s.Track && (!had || o != e) {
				changed = append(changed, p)
			}
			continue
		}
		e2, need := hashDecision(p, e, prev, racy)
		if need {
			toHash = append(toHash, p)
			if s.Track {
				changed = append(changed, p)
			}
			continue
		}
		if e2 != e {
			w.out[p] = e2
		}
		if s.Track && (!had || o != e2) {
			changed = append(changed, p)
		}
	}
	if err := hashAll(w.root, w.out, prev, toHash, racy, w.workers); err != nil {
		return nil, err
	}
	if s.Track && matched < len(prev) {
		for p := range prev {
			if _, ok := w.out[p]; !ok {
				changed = append(changed, p)
			}
		}
	}
	s.Changed = changed
	s.Settled = 0
	for _, p := range toHash {
		if e, ok := w.out[p]; ok && e.Verified {
			s.Settled++
		}
	}
	return w.out, nil
}

type walker struct {
	root    string
	ex      *Matcher
	sem     chan struct{}
	wg      gosync.WaitGroup
	start   time.Time // when the walk began (the racy rule's now)
	workers int

	mu      gosync.Mutex
	out     Manifest
	skipped []Skip
	// unreadable are the directories the walk could not read: what the
	// last sync knew below them is kept (finish).
	unreadable []string
	err        error
	watch      *Watch // each directory is watched before it is read
	watchErr   error
}

// dir reads one directory (rel is "" for the root) and walks its children,
// each subdirectory in a goroutine of its own, at most len(sem) at a time
// reading.
func (w *walker) dir(rel string) {
	defer w.wg.Done()
	w.sem <- struct{}{}
	full := w.root
	if rel != "" {
		full = filepath.Join(w.root, filepath.FromSlash(rel))
	}
	if w.watch != nil && w.watch.n != nil {
		if err := w.watch.n.add(rel); err != nil {
			w.mu.Lock()
			if w.watchErr == nil {
				w.watchErr = err
			}
			w.mu.Unlock()
		}
	}
	ents, err := readDirFunc(full)
	if err != nil {
		<-w.sem
		switch {
		case rel == "":
			w.fail(fmt.Errorf("read directory %s: %w", full, err))
		case errors.Is(err, fs.ErrNotExist):
			// Removed while we walked.
		default:
			// Unreadable (EACCES, ELOOP, ENAMETOOLONG, EIO...): left out,
			// and what the last sync knew below it stays as it was, so
			// nothing there is taken for deleted.
			w.mu.Lock()
			w.skipped = append(w.skipped, Skip{rel, "cannot be read: " + errText(err)})
			w.unreadable = append(w.unreadable, rel)
			w.mu.Unlock()
		}
		return
	}
	local := make([]pathEntry, 0, len(ents))
	var subdirs []string
	for _, de := range ents {
		p := de.name
		if rel != "" {
			p = rel + "/" + de.name
		}
		isDir := de.e.Mode.IsDir()
		if w.ex.Excluded(p, isDir) {
			continue
		}
		if n := len(w.root) + 1 + len(p); n > maxFullPath {
			w.mu.Lock()
			w.skipped = append(w.skipped, Skip{p, fmt.Sprintf("path too long: %d bytes, over PATH_MAX (4096); it and what it holds are not synced", n)})
			w.mu.Unlock()
			continue
		}
		local = append(local, pathEntry{p, de.e})
		if isDir {
			subdirs = append(subdirs, p)
		}
	}
	<-w.sem
	w.mu.Lock()
	for _, pe := range local {
		w.out[pe.p] = pe.e
	}
	w.mu.Unlock()
	for _, d := range subdirs {
		w.wg.Add(1)
		go w.dir(d)
	}
}

// readDirFunc is readDir; tests make it fail.
var readDirFunc = readDir

// errText is an error's innermost text ("file name too long"): the path is
// named beside it.
func errText(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// dirEntry is one entry of a directory as readDir found it.
type dirEntry struct {
	name string
	e    Entry
}

type pathEntry struct {
	p string
	e Entry
}

func (w *walker) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// entryOf records what a manifest keeps of fi; ok is false for file types
// that are never synced (sockets, devices, fifos).
func entryOf(fi fs.FileInfo) (Entry, bool) {
	e := Entry{Mode: fi.Mode() & (fs.ModeType | fs.ModePerm)}
	switch {
	case fi.IsDir(), fi.Mode()&fs.ModeSymlink != 0:
	case fi.Mode().IsRegular():
		e.Size = fi.Size()
		e.MTime = fi.ModTime().UnixNano()
		e.CTime, e.Ino = statIDs(fi)
	default:
		return e, false
	}
	return e, true
}

// hashAll hashes paths into m; a hash of a file the rule no longer takes
// for racy is Verified.
func hashAll(root string, m, prev Manifest, paths []string, racy racyRule, workers int) error {
	if len(paths) == 0 {
		return nil
	}
	var (
		wg   gosync.WaitGroup
		mu   gosync.Mutex
		next = make(chan string)
	)
	for range min(workers, len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				h, err := hashFile(filepath.Join(root, filepath.FromSlash(p)))
				mu.Lock()
				switch {
				case err != nil && !errors.Is(err, fs.ErrNotExist) && hadFile(prev, p):
					// Unreadable, not gone: as the last sync knew it, not
					// taken for deleted.
					m[p] = prev[p]
				case err != nil:
					delete(m, p) // gone now: the next scan sees it
				default:
					e := m[p]
					e.Hash, e.Verified = h, !racy.entry(e)
					m[p] = e
				}
				hashedFiles.Add(1)
				mu.Unlock()
			}
		}()
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	wg.Wait()
	return nil
}

// hashedFiles counts the files scans have read to hash (for tests).
var hashedFiles atomic.Int64

func hadFile(m Manifest, p string) bool {
	e, ok := m[p]
	return ok && e.Mode.IsRegular()
}

func hashFilePortable(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow|noWait, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := isRegular(f); err != nil {
		return "", err
	}
	return hashReader(f)
}

// hashReader is the content hash manifests record: 128 bits of SHA-256.
func hashReader(r io.Reader) (string, error) {
	h := sha256.New()
	// Through a pooled buffer: io.Copy from an os.File takes its WriteTo,
	// which makes a new 32 KiB buffer for each file hashed.
	buf := copyBufs.Get().(*[]byte)
	_, err := io.CopyBuffer(h, readerOnly{r}, *buf)
	copyBufs.Put(buf)
	if err != nil {
		return "", err
	}
	return hashString(h), nil
}

// Change is one difference between two manifests.
type Change struct {
	Path    string
	Deleted bool
	Entry   Entry // the new entry, when not deleted
}

// Diff lists what changed from old to cur: creations and modifications in
// lexical order (parents before children), then deletions deepest first. A
// deletion below a deleted directory is left out (removing the directory
// removes it).
func Diff(old, cur Manifest) []Change {
	var puts, dels []Change
	if len(old) == 0 {
		puts = make([]Change, 0, len(cur)) // a first scan: everything is new
	}
	found := 0 // paths of cur that old has
	for p, e := range cur {
		o, ok := old[p]
		if ok {
			found++
		}
		if !ok || !o.Same(e) {
			puts = append(puts, Change{Path: p, Entry: e})
		}
	}
	if found < len(old) {
		// Some path of old is not in cur (when every one is, the walk of
		// old would find nothing: half of a no-change Diff's lookups).
		for p, e := range old {
			if _, ok := cur[p]; !ok {
				dels = append(dels, Change{Path: p, Deleted: true, Entry: e})
			}
		}
	}
	return diffOf(puts, dels, cur)
}

// DiffOver is Diff of old and cur where only the paths listed can differ
// (Scanner.Changed): what the others hold is the same on both sides.
func DiffOver(old, cur Manifest, paths []string) []Change {
	var puts, dels []Change
	for _, p := range paths {
		e, ok := cur[p]
		o, had := old[p]
		switch {
		case ok && (!had || !o.Same(e)):
			puts = append(puts, Change{Path: p, Entry: e})
		case !ok && had:
			dels = append(dels, Change{Path: p, Deleted: true, Entry: o})
		}
	}
	return diffOf(puts, dels, cur)
}

// diffOf orders Diff's puts and deletions, and drops the deletions that
// another one (or a put of a file where a directory was) implies.
func diffOf(puts, dels []Change, cur Manifest) []Change {
	slices.SortFunc(puts, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(dels, func(a, b Change) int { return strings.Compare(b.Path, a.Path) })
	gone := map[string]bool{}
	var kept []Change
	for i := len(dels) - 1; i >= 0; i-- { // shallowest first
		d := dels[i]
		// Below a deleted directory, or below what is now a file or a
		// symlink: replacing the directory removed it (and a deletion
		// through a symlink would remove what it points to).
		if e, ok := cur[path.Dir(d.Path)]; gone[path.Dir(d.Path)] || ok && !e.Mode.IsDir() {
			gone[d.Path] = true
			continue
		}
		gone[d.Path] = true
		kept = append(kept, d)
	}
	slices.SortFunc(kept, func(a, b Change) int { return strings.Compare(b.Path, a.Path) })
	return append(puts, kept...)
}

// CheckPath refuses a path that could name something outside its tree: it
// must be relative, slash-separated, clean, and free of "." and ".."
// elements and NUL bytes.
func CheckPath(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("empty path")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case strings.Contains(p, `\`):
		return fmt.Errorf("path %q contains a backslash", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("path %q has an empty, . or .. element", p)
		}
	}
	return nil
}
