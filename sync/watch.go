package sync

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// A Watch keeps what a long-lived process knows of one tree current from
// file-system events (inotify), so that a round trip costs what changed,
// not the whole tree. Events only say where to look: each path they name is
// stat'ed again (a new directory is walked) and compared with the manifest
// as a full scan would, hashes included. Whatever the watch cannot vouch
// for makes the next scan a full one, which also re-arms it: the queue
// overflowed, a directory was renamed (its watches would keep their old
// names), the code dir itself moved, the reader died, a round trip did not
// finish, or the process is new (no watch yet). Where watching is not
// possible (the watch limit, another system) every scan is a full one, as
// without a watch.
type Watch struct {
	root string
	ex   *Matcher
	n    *inotify
	// off says why watching is given up for good (the watch limit).
	off string
	// unsettled are the files hashed while racy: each scan stats them
	// again, as a full scan would, until a hash of them is verified.
	unsettled map[string]bool
	// full is why the next scan is a full one, set by the owner (a round
	// that did not finish, a reset).
	full string
	// Log, when set, is told when and why a full scan replaces the
	// events (at debug level; the watch limit at warning).
	Log *slog.Logger
}

var errWatchLimit = errors.New("inotify watch limit")

// watchEvents counts the events read and fullScans the scans a watch could
// not avoid (for tests).
var watchEvents, fullScans, incrementalScans atomic.Int64

// NewWatch prepares watching root; its first scan is a full one.
func NewWatch(root string, ex *Matcher) *Watch {
	w := &Watch{root: root, ex: ex, unsettled: map[string]bool{}, full: "first scan"}
	if !watchSupported {
		w.off = "no inotify on this system"
	}
	return w
}

// Close stops watching.
func (w *Watch) Close() {
	if w != nil && w.n != nil {
		w.n.close()
		w.n = nil
	}
}

// Invalidate makes the next scan a full one.
func (w *Watch) Invalidate(why string) {
	if w != nil && w.full == "" {
		w.full = why
	}
}

// Touch makes the next scan look at p and at each directory above it
// again: for a change made to the manifest that the tree did not make (a
// path marked unknown, what a removal kept forgotten), which no event
// would report.
func (w *Watch) Touch(p string) {
	if w == nil || w.n == nil {
		return // no events to add to: the next scan is a full one
	}
	ps := []string{}
	for ; p != "." && p != "" && p != "/"; p = path.Dir(p) {
		ps = append(ps, p)
	}
	w.n.touch(ps)
}

func (w *Watch) log(msg string, args ...any) {
	if w.Log != nil {
		w.Log.Debug(msg, append([]any{"dir", w.root}, args...)...)
	}
}

// undoEntry is what a path held in a manifest before a scan changed it.
type undoEntry struct {
	Had   bool
	Entry Entry
}

// Undo restores a manifest to what it was before Update changed it.
type Undo map[string]undoEntry

// Apply restores m.
func (u Undo) Apply(m Manifest) {
	for p, x := range u {
		if x.Had {
			m[p] = x.Entry
		} else {
			delete(m, p)
		}
	}
}

func (u Undo) paths() []string {
	out := make([]string, 0, len(u))
	for p := range u {
		out = append(out, p)
	}
	return out
}

// undoOf lists what differs between old and cur (a full scan's result).
func undoOf(old, cur Manifest) Undo {
	u := Undo{}
	for p, e := range cur {
		if o, ok := old[p]; !ok || o != e {
			u[p] = undoEntry{ok, o}
		}
	}
	for p, o := range old {
		if _, ok := cur[p]; !ok {
			u[p] = undoEntry{true, o}
		}
	}
	return u
}

// Update brings m, the manifest of the tree's last scan, up to date in
// place and returns what changed (as Diff(before, after) would list it) and
// how to undo it. With no usable watch (w nil, or not vouching for the time
// since the last scan) it is a full scan, which arms w for the next one.
func (s *Scanner) Update(root string, m Manifest, w *Watch) ([]Change, Undo, error) {
	if w != nil && w.off == "" && w.full == "" && w.n != nil {
		touched, why := w.n.take()
		if why == "" {
			ch, u, ok, err := s.incremental(root, m, w, touched)
			if err != nil || ok {
				if ok {
					incrementalScans.Add(1)
				}
				return ch, u, err
			}
			w.n.touch(keys(touched))
			why = "a path the events named could not be read"
		}
		w.full = why
	}
	cur, err := s.rescan(root, m, w)
	if err != nil {
		return nil, nil, err
	}
	ch := Diff(m, cur)
	u := undoOf(m, cur)
	clear(m)
	for p, e := range cur {
		m[p] = e
	}
	return ch, u, nil
}

// Rescan is a full scan of root (prev, the last scan's manifest, says what
// needs hashing, as for Scan) that arms w for the next Update; without
// Update's list of changes and undo, for a caller that takes the tree as it
// is (the helper after the host placed a new sandbox's first push).
func (s *Scanner) Rescan(root string, prev Manifest, w *Watch) (Manifest, error) {
	return s.rescan(root, prev, w)
}

// Arm starts w watching every directory of root that m lists, without
// reading the tree, for a caller that knows root to be as m says (the
// helper, after the host placed a new sandbox's first push and said what
// it wrote): as after a full scan, the next Update takes the events. Where
// watching fails (the watch limit) the next scan is a full one.
func (w *Watch) Arm(m Manifest) {
	if w == nil || w.off != "" {
		return
	}
	w.renew(w.root, "armed from a known tree")
	if w.n == nil {
		return
	}
	dirs := []string{""}
	for p, e := range m {
		if e.Mode.IsDir() {
			dirs = append(dirs, p)
		}
	}
	sort.Strings(dirs) // parents first
	var err error
	for _, d := range dirs {
		if err = w.n.add(d); err != nil {
			break
		}
	}
	w.armed(err, m)
}

// renew replaces w's inotify instance with a new one, before the tree is
// watched again from scratch (watching is off when none can be made).
func (w *Watch) renew(root, what string) {
	w.log(what, "why", w.full)
	w.Close()
	n, err := newInotify(root)
	switch {
	case err == nil:
		w.n = n
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM):
		// Out of inotify instances (fs.inotify.max_user_instances, 128
		// by default, is per user: other programs of the user's hold
		// them) or descriptors, for now: this scan is a full one, and
		// the next tries again.
		w.full = err.Error()
		if w.Log != nil {
			w.Log.Warn("no inotify instance for watching: this scan walks the whole tree; the next one tries again (raise fs.inotify.max_user_instances if it goes on)", "dir", w.root, "err", err)
		}
	default:
		w.off = err.Error()
	}
}

// armed takes how arming the whole tree went (err: the first watch that
// failed; past the watch limit watching stops for good, else the next scan
// is a full one) and which of cur's files stay unsettled.
func (w *Watch) armed(err error, cur Manifest) {
	if err != nil {
		w.Close()
		if errors.Is(err, errWatchLimit) {
			w.off = err.Error()
			if w.Log != nil {
				w.Log.Warn("watching stopped", "dir", w.root, "err", err)
			}
		} else {
			w.full = err.Error()
		}
	} else {
		w.full = ""
	}
	clear(w.unsettled)
	for p, e := range cur {
		if e.Hash != "" && !e.Verified {
			w.unsettled[p] = true
		}
	}
}

func (s *Scanner) rescan(root string, m Manifest, w *Watch) (Manifest, error) {
	if w != nil && w.off == "" {
		w.renew(root, "full scan")
	}
	fullScans.Add(1)
	s.watch = nil
	if w != nil && w.n != nil {
		s.watch = w
	}
	cur, err := s.Scan(root, m)
	s.watch = nil
	if err != nil {
		if w != nil {
			w.Invalidate("the last scan failed")
		}
		return nil, err
	}
	if w != nil {
		w.armed(s.watchErr, cur)
	}
	s.watchErr = nil
	return cur, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// incremental stats what the events named (and the unsettled files) and
// walks the directories that are new. ok is false when a full scan must
// be done instead.
func (s *Scanner) incremental(root string, m Manifest, w *Watch, touched map[string]bool) ([]Change, Undo, bool, error) {
	start := time.Now()
	for p := range w.unsettled {
		touched[p] = true
	}
	paths := keys(touched)
	sort.Strings(paths) // parents first
	stats := newStatCache(root)
	defer stats.close()
	now := Manifest{} // what the touched paths (and new trees) are now
	gone := map[string]bool{}
	view := func(p string) (Entry, bool) {
		if gone[p] {
			return Entry{}, false
		}
		if e, ok := now[p]; ok {
			return e, true
		}
		e, ok := m[p]
		return e, ok
	}
	removeBelow := func(p string) {
		for q := range m {
			if strings.HasPrefix(q, p+"/") {
				gone[q] = true
			}
		}
		for q := range now {
			if strings.HasPrefix(q, p+"/") {
				delete(now, q)
			}
		}
	}
	for _, p := range paths {
		if CheckPath(p) != nil {
			continue
		}
		if dir := path.Dir(p); dir != "." {
			if pe, ok := view(dir); !ok || !pe.Mode.IsDir() {
				// Under something that is no longer a directory: what it
				// held went with it (the parent's own entry says so).
				if _, had := m[p]; had {
					gone[p] = true
				}
				continue
			}
		}
		old, had := view(p)
		var (
			e      Entry
			exists bool
			err    error
		)
		if statPathFunc != nil {
			e, exists, err = statPathFunc(filepath.Join(root, filepath.FromSlash(p)))
		} else {
			e, exists, err = stats.stat(p)
		}
		if err != nil {
			return nil, nil, false, nil
		}
		if exists && w.ex.Excluded(p, e.Mode.IsDir()) {
			exists = false
		}
		if !exists {
			if had {
				gone[p] = true
				delete(now, p)
				if old.Mode.IsDir() {
					removeBelow(p)
				}
			}
			continue
		}
		if len(root)+1+len(p) > maxFullPath {
			return nil, nil, false, nil
		}
		delete(gone, p)
		now[p] = e
		if had && old.Mode.IsDir() && !e.Mode.IsDir() {
			removeBelow(p)
		}
		known := had && old.Mode.IsDir()
		if known && e.Mode.IsDir() && !w.n.watched(p) {
			// Known, but without a watch (the sync made it, an undo
			// restored it): walked again as if new, and what the
			// manifest had below it is gone unless the walk finds it.
			removeBelow(p)
			known = false
		}
		if e.Mode.IsDir() && !known {
			// A new directory: watched, then walked (what is written in
			// it after the watch is in the next round's events).
			sub := &walker{root: root, ex: w.ex, out: Manifest{}, sem: make(chan struct{}, 8), watch: w}
			sub.wg.Add(1)
			sub.dir(p)
			sub.wg.Wait()
			if sub.err != nil || len(sub.skipped) > 0 || s.watchErr != nil || sub.watchErr != nil {
				if sub.watchErr != nil {
					s.watchErr = sub.watchErr
				}
				return nil, nil, false, nil
			}
			for q, qe := range sub.out {
				now[q] = qe
				delete(gone, q)
			}
		}
	}
	// Hashes, as a full scan decides them.
	racy := racyFor(root, start)
	var toHash []string
	s.Deferred = nil
	for p, e := range now {
		if !e.Mode.IsRegular() {
			continue
		}
		if e2, need := hashDecision(p, e, m, racy); !need {
			now[p] = e2
		} else if s.DeferHash && racy.entry(e) && statShows(m, p, e) {
			s.Deferred = append(s.Deferred, p)
		} else {
			toHash = append(toHash, p)
		}
	}
	if err := hashAll(root, now, m, toHash, racy, 8); err != nil {
		return nil, nil, false, err
	}
	s.Settled = 0
	for _, p := range toHash {
		if e, ok := now[p]; ok && e.Verified {
			s.Settled++
		}
	}
	s.Skipped = nil
	// What changed, as Diff lists it, over the affected paths only.
	oldSub, curSub := Manifest{}, Manifest{}
	u := Undo{}
	for p, e := range now {
		o, ok := m[p]
		if ok {
			oldSub[p] = o
		}
		curSub[p] = e
		if !ok || o != e {
			u[p] = undoEntry{ok, o}
		}
	}
	for p := range gone {
		if o, ok := m[p]; ok {
			if _, still := now[p]; !still {
				oldSub[p] = o
				u[p] = undoEntry{true, o}
			}
		}
	}
	ch := Diff(oldSub, curSub)
	for p, x := range u {
		if e, ok := now[p]; ok {
			m[p] = e
		} else if x.Had {
			delete(m, p)
		}
	}
	for p := range touched {
		delete(w.unsettled, p)
	}
	for p, e := range now {
		if e.Mode.IsRegular() && e.Hash != "" && !e.Verified {
			w.unsettled[p] = true
		}
	}
	for _, p := range s.Deferred {
		w.unsettled[p] = true
	}
	return ch, u, true, nil
}

// hashDecision is the full scan's rule: whether the file at p, found as e,
// must be read and hashed, given prev, the manifest of the last sync; when
// not, the entry to record (a verified hash carried over).
func hashDecision(p string, e Entry, prev Manifest, racy racyRule) (Entry, bool) {
	if racy.entry(e) {
		return e, true // it may still change within its mtime's tick
	}
	if statShows(prev, p, e) {
		return e, false // a change the stat shows: no hash needed to see it
	}
	old := prev[p]
	moved := (old.Ino != 0 && old.Ino != e.Ino) || (old.CTime != 0 && old.CTime != e.CTime)
	switch {
	case moved || (old.Hash != "" && !old.Verified):
		return e, true
	case old.Hash != "":
		e.Hash, e.Verified = old.Hash, true
	}
	return e, false
}

// statShows reports whether e, found at p, differs from prev's entry in
// what Diff compares before any hash: a change whatever the content.
func statShows(prev Manifest, p string, e Entry) bool {
	old, had := prev[p]
	return !had || old.Mode != e.Mode || old.Size != e.Size || old.MTime != e.MTime
}

// statPathFunc, when set, is what the incremental scan stats each path
// with instead of its statCache (statPath's, by each directory's
// descriptor); a test makes it report a coarse clock's timestamps (this
// kernel's multigrain ones never repeat once read).
var statPathFunc func(full string) (Entry, bool, error)

// statPath is what a scan records of one path; exists is false when it is
// gone or of a type never synced.
func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

func statPath(full string) (Entry, bool, error) {
	fi, err := os.Lstat(full)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return Entry{}, false, nil
		}
		return Entry{}, false, err
	}
	e, ok := entryOf(fi)
	if !ok {
		return Entry{}, false, nil
	}
	if e.isLink() {
		t, err := os.Readlink(full)
		if err != nil || t == "" {
			return Entry{}, false, nil
		}
		e.Link = t
	}
	return e, true, nil
}

// A Verification checks, off the critical path, what the watches keep
// against a full scan of each watched code dir: the owner begins it and
// finishes it with its round trips excluded (they change the manifests),
// and runs Scan between without (it only reads the trees). Anything the
// events missed is logged and makes the next scan a full one. A round trip
// between Begin and Finish voids it (Finish reports nothing).
type Verification struct {
	h      *Host
	rounds uint64
	dirs   []int
	scans  []Manifest
	skip   [][]Skip
}

// BeginVerify starts a verification of the watched code dirs (nil when
// none is watched); called as a round trip would be.
func (h *Host) BeginVerify() *Verification {
	v := &Verification{h: h, rounds: h.rounds}
	for i, d := range h.dirs {
		if d.watch != nil && d.watch.n != nil && d.watch.full == "" && d.watch.off == "" {
			v.dirs = append(v.dirs, i)
		}
	}
	if len(v.dirs) == 0 {
		return nil
	}
	return v
}

// Scan walks the trees: without the owner's lock, beside round trips.
func (v *Verification) Scan() error {
	for _, i := range v.dirs {
		d := v.h.dirs[i]
		sc := &Scanner{Exclude: d.ex, Workers: 2}
		m, err := sc.Scan(d.cfg.Path, nil)
		if err != nil {
			return err
		}
		v.scans = append(v.scans, m)
		v.skip = append(v.skip, sc.Skipped)
	}
	return nil
}

// Finish compares and returns the paths the events missed (at most 20
// named, n counting them all); called as a round trip would be.
func (v *Verification) Finish(log *slog.Logger) (missed []string, n int) {
	h := v.h
	if h.rounds != v.rounds || len(v.scans) != len(v.dirs) {
		return nil, 0 // a round trip ran meanwhile: its scan is newer
	}
	for k, i := range v.dirs {
		d := h.dirs[i]
		w := d.watch
		if w == nil || w.n == nil || w.full != "" || w.off != "" {
			continue
		}
		bad, ok := missedPaths(h.st.Manifests[i], v.scans[k], v.skip[k], w)
		if !ok {
			continue // the next scan is a full one anyway
		}
		if len(bad) == 0 {
			continue
		}
		n += len(bad)
		for _, p := range bad {
			if len(missed) < 20 {
				missed = append(missed, filepath.Join(d.cfg.Path, p))
			}
		}
		w.Invalidate("the verification scan found changes the events missed")
		if log != nil {
			log.Warn("sync: the file-system events missed changes; the next round trip scans in full", "dir", d.cfg.Path, "paths", len(bad), "first", bad[:min(len(bad), 5)])
		}
	}
	return missed, n
}

// missedPaths lists the paths where m, kept by w's events, differs from
// scan, a full scan done since, leaving out those the next incremental scan
// looks at anyway (named by a pending event, below one, unsettled, or
// under a directory the scan could not read). ok is false when w is
// broken (the next scan is a full one).
func missedPaths(m, scan Manifest, skip []Skip, w *Watch) (bad []string, ok bool) {
	pending, broken := w.n.pending()
	if broken {
		return nil, false
	}
	for p := range w.unsettled {
		pending[p] = true
	}
	for _, s := range skip {
		pending[s.Path] = true
	}
	excused := func(p string) bool {
		for q := p; ; q = path.Dir(q) {
			if pending[q] {
				return true
			}
			if !strings.Contains(q, "/") {
				return false
			}
		}
	}
	for p, e := range scan {
		if o, ok := m[p]; (!ok || !sameIgnoringHash(o, e)) && !excused(p) {
			bad = append(bad, p)
		}
	}
	for p, o := range m {
		if _, ok := scan[p]; !ok && o.Mode != fs.ModeIrregular && !excused(p) {
			bad = append(bad, p)
		}
	}
	sort.Strings(bad)
	return bad, true
}

// VerifyEvery is how often a long-lived process verifies its watches
// with a full scan (when a round trip ran since the last verification).
const VerifyEvery = 5 * time.Minute

// VerifyLive checks, as Host's Verification does, what each sync helper
// state this process keeps in memory (WatchHelper) holds against a full
// scan of its code dir, beside round trips: a state a round trip took
// meanwhile is left alone. What the events missed is logged and makes the
// next round trip scan in full. It returns how many paths were missed.
func VerifyLive(log *slog.Logger) int {
	type item struct {
		file string
		ls   *liveState
		root string
		ex   *Matcher
	}
	var items []item
	live.Lock()
	for f, ls := range live.m {
		if w := ls.watch; w != nil && w.n != nil && w.full == "" && w.off == "" && !ls.verified {
			items = append(items, item{f, ls, w.root, w.ex})
		}
	}
	live.Unlock()
	total := 0
	for _, it := range items {
		sc := &Scanner{Exclude: it.ex, Workers: 2}
		scan, err := sc.Scan(it.root, nil)
		if err != nil {
			continue
		}
		live.Lock()
		if live.m[it.file] != it.ls {
			live.Unlock()
			continue // a round trip took it meanwhile: its scan is newer
		}
		bad, ok := missedPaths(it.ls.state.Manifest, scan, sc.Skipped, it.ls.watch)
		if ok && len(bad) > 0 {
			it.ls.watch.Invalidate("the verification scan found changes the events missed")
		} else if ok {
			it.ls.verified = true // until the next round trip
		}
		live.Unlock()
		if len(bad) > 0 && log != nil {
			log.Warn("sync: the file-system events missed changes; the next round trip scans in full", "dir", it.root, "paths", len(bad), "first", bad[:min(len(bad), 5)])
		}
		total += len(bad)
	}
	return total
}
