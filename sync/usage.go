package sync

import (
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
)

// A Usage keeps the disk a tree will take once it comes back current from
// file-system events, for a long-lived process that checks it after every
// command (the session's workspace check in sbx-mcp): a check then costs
// what changed, not a walk of the whole tree. Its rule is the workspace
// check's: a regular file counts its length or its blocks, whichever is
// more, each name of it counts, anything else its blocks. The tree is the
// sandbox's: it is read only through an os.Root (a symlink never leads the
// count out of it), and events only say what to stat again. Where the
// watch cannot vouch for the time since the last count (the first one, a
// queue overflow, a renamed directory, the watch bound) the count is a full
// walk, as without a watch.
type Usage struct {
	root  string
	n     *inotify
	off   string
	cost  map[string]int64 // path ("" the root) -> what it counts
	total int64
	// names lists the names of each inode with more than one (a write to
	// one changes what the others count, with no event naming them).
	names map[uint64]map[string]bool
	inoOf map[string]uint64
	dirs  map[string]bool // the directories counted (what a removal walks below)
}

// NewUsage prepares counting root.
func NewUsage(root string) *Usage {
	u := &Usage{root: root}
	if !watchSupported {
		u.off = "no inotify on this system"
	}
	return u
}

// Close stops watching.
func (u *Usage) Close() {
	if u != nil && u.n != nil {
		u.n.close()
		u.n = nil
	}
}

// Watching reports whether the next Total may use the events.
func (u *Usage) Watching() bool { return u.off == "" }

func (u *Usage) note(p string, fi fs.FileInfo) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	linked := ok && fi.Mode().IsRegular() && st.Nlink >= 2
	var ino uint64
	if ok {
		ino = uint64(st.Ino)
	}
	u.noteIno(p, linked, ino)
}

// noteIno records p as a name of inode ino when linked (a regular file
// with more than one name), and forgets what p named before.
func (u *Usage) noteIno(p string, linked bool, ino uint64) {
	if old, ok := u.inoOf[p]; ok {
		delete(u.names[old], p)
		delete(u.inoOf, p)
	}
	if !linked {
		return
	}
	if u.names[ino] == nil {
		u.names[ino] = map[string]bool{}
	}
	u.names[ino][p] = true
	u.inoOf[p] = ino
}

func costOf(fi fs.FileInfo) int64 {
	var n int64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n = int64(st.Blocks) * 512
	}
	if fi.Mode().IsRegular() {
		n = max(n, fi.Size())
	}
	return n
}

// Total returns what the tree takes now. A missing root counts 0.
func (u *Usage) Total() (int64, error) {
	if u.off != "" {
		return 0, errUsageOff
	}
	r, err := os.OpenRoot(u.root)
	if err != nil {
		if os.IsNotExist(err) {
			u.Close()
			u.cost = nil
			return 0, nil
		}
		return 0, err
	}
	defer r.Close()
	if u.n != nil && u.cost != nil {
		touched, why := u.n.take()
		written := u.n.takeWritten()
		if why == "" {
			for p := range written {
				if _, err := r.Lstat(p); err != nil {
					// Written, then unlinked: what it wrote may be in a
					// name no event names (a hard link).
					why = "an unlinked file was written"
				}
			}
		}
		if why == "" {
			if u.update(r, touched) {
				return u.total, nil
			}
		}
	}
	u.Close()
	n, err := newInotifyMode(u.root, true)
	if err != nil {
		u.off = err.Error()
		return 0, errUsageOff
	}
	u.n = n
	u.cost, u.total = map[string]int64{}, 0
	u.names, u.inoOf, u.dirs = map[uint64]map[string]bool{}, map[string]uint64{}, map[string]bool{}
	if !u.walkAll(r) {
		u.Close()
		u.cost = nil
		if u.off != "" {
			return 0, errUsageOff
		}
		return 0, errUsageUnreadable
	}
	return u.total, nil
}

var (
	errUsageOff        = &os.PathError{Op: "watch", Err: syscall.ENOTSUP}
	errUsageUnreadable = &os.PathError{Op: "read", Err: syscall.EACCES}
)

// UsageOff reports whether err from Total means counting by events is not
// possible (the caller walks the tree itself).
func UsageOff(err error) bool { return err == errUsageOff || err == errUsageUnreadable }

func (u *Usage) set(p string, c int64) {
	u.total += c - u.cost[p]
	u.cost[p] = c
}

// dropBelow forgets what the directory p held.
func (u *Usage) dropBelow(p string) {
	for q := range u.cost {
		if strings.HasPrefix(q, p+"/") {
			u.drop(q)
		}
	}
}

func (u *Usage) drop(p string) {
	delete(u.dirs, p)
	if c, ok := u.cost[p]; ok {
		u.total -= c
		delete(u.cost, p)
	}
	if ino, ok := u.inoOf[p]; ok {
		delete(u.names[ino], p)
		delete(u.inoOf, p)
	}
}

// walk watches the directory p, then counts what it holds; false when
// something could not be read or watched.
func (u *Usage) walk(r *os.Root, p string) bool {
	if err := u.n.add(p); err != nil {
		if strings.Contains(err.Error(), errWatchLimit.Error()) {
			u.off = err.Error()
		}
		return false
	}
	dir := p
	if dir == "" {
		dir = "."
	}
	f, err := r.Open(dir)
	if err != nil {
		return os.IsNotExist(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return false
	}
	for _, name := range names {
		q := name
		if p != "" {
			q = p + "/" + name
		}
		fi, err := r.Lstat(q)
		if err != nil {
			continue // gone since the listing
		}
		u.set(q, costOf(fi))
		u.note(q, fi)
		if fi.IsDir() {
			u.dirs[q] = true
		}
		if fi.IsDir() && !u.walk(r, q) {
			return false
		}
	}
	return true
}

// update stats what the events named (and each one's directory, whose own
// blocks grow with it); false when a full count must be done instead.
func (u *Usage) update(r *os.Root, touched map[string]bool) bool {
	for p := range touched {
		if d := path.Dir(p); d != "." {
			touched[d] = true
		}
		if ino, ok := u.inoOf[p]; ok {
			for q := range u.names[ino] {
				touched[q] = true // the same file: its count changed too
			}
		}
	}
	// Each name through its directory's root, opened once for all the
	// names in it (sorted, they come together): r.Lstat would open every
	// directory of the path again for each name.
	dirs := &dirRoots{base: r, m: map[string]*os.Root{}}
	defer dirs.close()
	for _, p := range sortedKeys(touched) {
		sub, name := dirs.split(p)
		fi, err := sub.Lstat(name)
		if err != nil || (u.dirs[p] && !fi.IsDir()) {
			// Gone (or now below a link out of the tree, or no longer a
			// directory): what it held goes.
			if u.dirs[p] {
				u.dropBelow(p)
				delete(u.dirs, p)
			}
			if err != nil {
				u.drop(p)
				continue
			}
		}
		u.set(p, costOf(fi))
		if fi.IsDir() {
			u.dirs[p] = true
		}
		u.note(p, fi)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			for q := range u.names[uint64(st.Ino)] {
				if q != p && !touched[q] {
					if qi, err := r.Lstat(q); err == nil && os.SameFile(qi, fi) {
						u.set(q, costOf(qi))
					}
				}
			}
		}
		if fi.IsDir() && !u.n.watched(p) {
			u.dropBelow(p)
			u.dirs[p] = true
			if !u.walk(r, p) {
				return false
			}
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := keys(m)
	sortStrings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }
