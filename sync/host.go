package sync

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// QuarantineDir is where protected changes wait, relative to the code dir.
const QuarantineDir = ".sbx/quarantine"

// HostDir configures one code dir on the host side.
type HostDir struct {
	Path      string   // absolute; the same path inside the sandbox
	Exclude   []string // patterns beyond DefaultExcludes and .sbxignore
	Protected []string // nil means DefaultProtected
	// Hooks are the directories, relative to Path, that the host's git runs
	// hooks from (its effective core.hooksPath, when inside the code dir;
	// "." for the code dir itself). The session reads them from the host's
	// git config; sync only uses them: they wait in quarantine like the
	// protected names, and the directories above them may not become
	// symlinks or files.
	Hooks []string
}

// Host is the host side of the sync of one session: its manifests of the
// last synced state, kept in stateDir, and the round trips.
type Host struct {
	stateDir string
	dirs     []*hostDir
	st       hostState
}

type hostDir struct {
	cfg       HostDir
	ex        *Matcher
	protected *protectedSet
	excludes  []string // what the helper is told
}

type hostState struct {
	Manifests []Manifest
	Seq       uint64 // the last round trip's number
	Ack       uint64 // the last round trip whose pull was applied
	Reset     bool   // the next round trip starts the sandbox side afresh
}

// Report says what one round trip did.
type Report struct {
	Pushed  int // changes sent into the sandbox
	Applied int // changes brought back to the host
	// Refused lists sandbox changes kept out of the host (by the helper's
	// rules or the host's), with the reason.
	Refused []Refusal
	// Conflicts lists paths changed on both sides: the host's version stays,
	// the sandbox's is beside it as NAME.sbx-conflict (on the host, or in the
	// sandbox when a host change replaced a sandbox change).
	Conflicts []string
	// Quarantined lists protected paths whose sandbox change waits under
	// .sbx/quarantine/ for sbx accept.
	Quarantined []string
	// ProtectedPushed lists protected paths that changed on the host since
	// the last sync (and went into the sandbox). After a host command such
	// as git pull, these are files the command wrote that host tools trust.
	ProtectedPushed []string
}

// OpenHost loads the sync state of a session from stateDir.
func OpenHost(stateDir string, dirs []HostDir) (*Host, error) {
	h := &Host{stateDir: stateDir}
	for _, d := range dirs {
		if !filepath.IsAbs(d.Path) {
			return nil, fmt.Errorf("code dir %q is not absolute", d.Path)
		}
		pats := append(append([]string{}, DefaultExcludes...), d.Exclude...)
		if raw, err := os.ReadFile(filepath.Join(d.Path, ".sbxignore")); err == nil {
			pats = append(pats, ParseIgnore(string(raw))...)
		}
		ex, err := NewMatcher(pats)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Path, err)
		}
		prot := d.Protected
		if prot == nil {
			prot = DefaultProtected
		}
		pm, err := newProtectedSet(prot, d.Hooks)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Path, err)
		}
		h.dirs = append(h.dirs, &hostDir{cfg: d, ex: ex, protected: pm, excludes: pats[len(DefaultExcludes):]})
	}
	if err := h.load(); err != nil || len(h.st.Manifests) != len(dirs) {
		h.st = hostState{Reset: true}
	}
	for len(h.st.Manifests) < len(dirs) {
		h.st.Manifests = append(h.st.Manifests, Manifest{})
	}
	return h, nil
}

func (h *Host) statePath() string { return filepath.Join(h.stateDir, "sync.state") }
func (h *Host) spoolPath() string { return filepath.Join(h.stateDir, "pull.spool") }
func (h *Host) pendingPath() string {
	return filepath.Join(h.stateDir, "pull.pending")
}

func (h *Host) load() error {
	f, err := os.Open(h.statePath())
	if err != nil {
		return err
	}
	defer f.Close()
	return gob.NewDecoder(f).Decode(&h.st)
}

func (h *Host) save() error {
	tmp := h.statePath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = gob.NewEncoder(f).Encode(&h.st)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	return os.Rename(tmp, h.statePath())
}

// Reset forgets the sandbox side: the next round trip pushes every file (a
// new sandbox starts empty).
func (h *Host) Reset() {
	h.st = hostState{Reset: true, Seq: h.st.Seq}
	for range h.dirs {
		h.st.Manifests = append(h.st.Manifests, Manifest{})
	}
	os.Remove(h.pendingPath())
	os.Remove(h.spoolPath())
}

// Round is one round trip in progress.
type Round struct {
	h       *Host
	Request HelperRequest
	cur     []Manifest
	changes [][]Change
	spooled bool
	report  Report
}

// Begin finishes a pull a crash interrupted, scans the host tree and
// prepares the round trip: its request and its push.
func (h *Host) Begin() (*Round, Report, error) {
	var recovered Report
	if err := h.recover(&recovered); err != nil {
		return nil, recovered, err
	}
	// A random round-trip number: nothing needs saving for a round trip
	// that changes nothing, and a number is never reused after a crash.
	var seq [8]byte
	for binary.LittleEndian.Uint64(seq[:]) == 0 {
		rand.Read(seq[:])
	}
	h.st.Seq = binary.LittleEndian.Uint64(seq[:])
	r := &Round{h: h, Request: HelperRequest{Version: ProtocolVersion, Seq: h.st.Seq, Ack: h.st.Ack}}
	for i, d := range h.dirs {
		cur, err := (&Scanner{Exclude: d.ex}).Scan(d.cfg.Path, h.st.Manifests[i])
		if err != nil {
			return nil, recovered, fmt.Errorf("scan %s: %w", d.cfg.Path, err)
		}
		r.cur = append(r.cur, cur)
		r.changes = append(r.changes, Diff(h.st.Manifests[i], cur))
		r.report.Pushed += len(r.changes[i])
		for _, c := range r.changes[i] {
			if d.protected.protects(c.Path, c.Entry, c.Deleted) {
				r.report.ProtectedPushed = append(r.report.ProtectedPushed, filepath.Join(d.cfg.Path, c.Path))
			}
		}
		r.Request.Dirs = append(r.Request.Dirs, HelperDir{Path: d.cfg.Path, Exclude: d.excludes, Reset: h.st.Reset})
	}
	return r, recovered, nil
}

// Changed reports whether the host has anything to push.
func (r *Round) Changed() bool { return r.report.Pushed > 0 }

// WritePush writes the host's changes, one patch per code dir.
func (r *Round) WritePush(w io.Writer) error {
	for i, d := range r.h.dirs {
		if err := WritePatch(w, d.cfg.Path, r.changes[i]); err != nil {
			return err
		}
	}
	return nil
}

// ReadPull receives the sandbox's changes, one patch per code dir, into a
// spool file, checking every entry first: a patch that breaks a rule is
// refused as a whole, and nothing of it is applied.
func (r *Round) ReadPull(rd io.Reader) error {
	f, err := os.OpenFile(r.h.spoolPath(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spool the sandbox's changes: %w", err)
	}
	tee := io.TeeReader(rd, f)
	items := 0
	targets := map[string]string{} // the patch's symlinks, by code dir and path
	err = r.h.eachPull(tee, func(d *hostDir, root *os.Root, links map[string]bool, it *Item) error {
		items++
		if rf := CheckPullBack(it.Path, it.Entry, it.Deleted); rf != nil {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: rf.Reason}
		}
		if d.ex.ExcludedPath(it.Path, it.Entry.Mode.IsDir()) {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: "an excluded path"}
		}
		if err := parentsPlain(root, links, it.Path); err != nil {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: err.Error()}
		}
		if !it.Deleted && it.Entry.isLink() {
			links[it.Path] = true
			targets[d.cfg.Path+"\x00"+it.Path] = it.Entry.Link
			if err := CheckLinkTree(it.Path, it.Entry.Link, hostLinks(root, d.cfg.Path, targets)); err != nil {
				return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: fmt.Sprintf("symlink to %q: %v", it.Entry.Link, err)}
			}
		}
		if _, err := io.Copy(io.Discard, it.Body); err != nil {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: "bad tar stream: " + err.Error()}
		}
		return nil
	})
	if err == nil {
		err = ExpectEnd(tee)
	}
	if err == nil && items > 0 {
		err = f.Sync() // the spool is the journal of an interrupted pull
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || items == 0 {
		os.Remove(r.h.spoolPath())
		return err
	}
	r.spooled = true
	return nil
}

// hostLinks looks symlinks up for CheckLinkTree: those earlier in the same
// patch (targets, keyed by code dir and path), then the host's, through root,
// which never leaves the code dir.
func hostLinks(root *os.Root, dir string, targets map[string]string) func(string) (string, bool) {
	return func(q string) (string, bool) {
		if t, ok := targets[dir+"\x00"+q]; ok {
			return t, true
		}
		fi, err := root.Lstat(q)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return "", false
		}
		t, err := root.Readlink(q)
		if err != nil {
			return "/", true // unreadable: counted as leaving
		}
		return t, true
	}
}

// eachPull reads one patch per code dir from rd, calling fn for each item
// with the code dir's root.
func (h *Host) eachPull(rd io.Reader, fn func(*hostDir, *os.Root, map[string]bool, *Item) error) error {
	for _, d := range h.dirs {
		root, err := os.OpenRoot(d.cfg.Path)
		if err != nil {
			return err
		}
		links := map[string]bool{}
		err = ReadPatch(rd, DefaultLimits, func(it *Item) error { return fn(d, root, links, it) })
		root.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// parentsPlain refuses a path whose parent directories include a symlink,
// on the host now or earlier in the same patch: a write there would land
// elsewhere than its name says (.git through a link named otherwise, say).
func parentsPlain(root *os.Root, links map[string]bool, p string) error {
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if links[dir] {
			return fmt.Errorf("its parent %s is a symlink in the same patch", dir)
		}
		fi, err := root.Lstat(dir)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("its parent %s is a symlink on the host", dir)
		}
	}
	return nil
}

// Finish applies the spooled pull (after the helper's reply) and saves the
// state. A crash during it leaves the spool, and the next Begin applies it
// again: each file ends up old or new, never half written.
func (r *Round) Finish(reply HelperReply) (Report, error) {
	h := r.h
	rep := r.report
	rep.Refused = append(rep.Refused, reply.Kept...)
	rep.Conflicts = append(rep.Conflicts, reply.Conflicts...)
	if reply.Error != "" {
		return rep, fmt.Errorf("sandbox side of the sync: %s", reply.Error)
	}
	// The sandbox now mirrors what was pushed.
	h.st.Manifests = r.cur
	wasReset := h.st.Reset
	h.st.Reset = false
	if !r.spooled {
		// Nothing came back: nothing to save but a reset. A push alone is not
		// saved either (a later process that lost it sends the same changes
		// again, which the sandbox applies as no-ops), so a change costs its
		// file, not a rewrite of the whole manifest.
		if !wasReset {
			return rep, nil
		}
		return rep, h.save()
	}
	if err := os.WriteFile(h.pendingPath(), []byte(strconv.FormatUint(r.Request.Seq, 10)), 0o600); err != nil {
		return rep, err
	}
	if err := h.save(); err != nil {
		return rep, err
	}
	if err := h.applySpool(r.Request.Seq, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// recover applies a spooled pull that a crash interrupted.
func (h *Host) recover(rep *Report) error {
	raw, err := os.ReadFile(h.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	seq, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		os.Remove(h.pendingPath())
		return nil
	}
	return h.applySpool(seq, rep)
}

func (h *Host) applySpool(seq uint64, rep *Report) error {
	f, err := os.Open(h.spoolPath())
	if err != nil {
		return fmt.Errorf("open spooled changes: %w", err)
	}
	defer f.Close()
	var roots *dirRoots
	err = h.eachPull(f, func(d *hostDir, root *os.Root, links map[string]bool, it *Item) error {
		if roots == nil || roots.base != root {
			if roots != nil {
				roots.close()
			}
			roots = &dirRoots{base: root, m: map[string]*os.Root{}, verify: true}
		}
		return h.applyOne(h.indexOf(d), d, roots, it, rep)
	})
	if roots != nil {
		roots.close()
	}
	if err != nil {
		return fmt.Errorf("bring back the sandbox's changes: %w", err)
	}
	h.st.Ack = seq
	if err := h.save(); err != nil {
		return err
	}
	os.Remove(h.pendingPath())
	os.Remove(h.spoolPath())
	return nil
}

func (h *Host) indexOf(d *hostDir) int {
	for i, x := range h.dirs {
		if x == d {
			return i
		}
	}
	return -1
}

func (h *Host) applyOne(i int, d *hostDir, roots *dirRoots, it *Item, rep *Report) error {
	root := roots.base
	m := h.st.Manifests[i]
	full := filepath.Join(d.cfg.Path, it.Path)
	if d.protected.protects(it.Path, it.Entry, it.Deleted) {
		if it.Deleted {
			rep.Quarantined = append(rep.Quarantined, full+" (deleted in the sandbox; not applied)")
			return nil
		}
		dst := path.Join(QuarantineDir, it.Path)
		if err := root.MkdirAll(path.Dir(dst), 0o700); err != nil {
			return err
		}
		if _, err := writeItem(root, it, dst); err != nil {
			return err
		}
		if !it.Entry.Mode.IsDir() {
			rep.Quarantined = append(rep.Quarantined, full)
		}
		return nil
	}
	if it.Deleted || !it.Entry.Mode.IsDir() {
		roots.invalidate(it.Path) // a directory there goes away
	}
	// Operations on the path go through its directory's root.
	dr, name := roots.split(it.Path)
	base, had := m[it.Path]
	now, exists, err := lstatEntry(dr, name, false)
	if err != nil {
		return err
	}
	if exists && !it.Deleted {
		same, err := sameContent(dr, name, it, now)
		if err != nil {
			return err
		}
		if same {
			// Already there (a redone pull, or the same edit on both sides).
			m[it.Path] = withHash(dr, name, now)
			return nil
		}
	}
	hostChanged := exists != had || (exists && !now.Mode.IsDir() && !sameIgnoringHash(base, now))
	if hostChanged && !(it.Deleted && !exists) {
		// Changed on both sides: the host's version stays; the sandbox's is
		// kept beside it, and the next push sends the host's to the sandbox.
		// Mark the path's base as unknown, so the next push sends the host's
		// version (or its deletion) whatever it is now.
		m[it.Path] = Entry{Mode: fs.ModeIrregular}
		if !it.Deleted && !it.Entry.Mode.IsDir() {
			aside := conflictName(dr, name)
			if _, err := writeItem(dr, it, aside); err != nil {
				return err
			}
			rep.Conflicts = append(rep.Conflicts, filepath.Join(d.cfg.Path, path.Dir(it.Path), path.Base(aside)))
		}
		return nil
	}
	e, err := writeItem(dr, it, name)
	if err != nil {
		return err
	}
	rep.Applied++
	if it.Deleted {
		for p := range m {
			if p == it.Path || strings.HasPrefix(p, it.Path+"/") {
				delete(m, p)
			}
		}
		return nil
	}
	m[it.Path] = e
	return nil
}

// sameContent reports whether the host's entry now already is the item. For
// a file of the same size, mode and mtime it compares the content, buffering
// the item's body (which then stays readable) up to a size; past it, equal
// size, mode and nanosecond mtime count as the same file.
func sameContent(root *os.Root, name string, it *Item, now Entry) (bool, error) {
	switch {
	case it.Entry.Mode.IsDir():
		return now.Mode == it.Entry.Mode, nil
	case it.Entry.isLink():
		return now.isLink() && now.Link == it.Entry.Link, nil
	case !now.Mode.IsRegular() || now.Mode.Perm() != it.Entry.Mode.Perm() || now.Size != it.Entry.Size || now.MTime != it.Entry.MTime:
		return false, nil
	case it.Entry.Size > maxCompare:
		return true, nil
	}
	body, err := io.ReadAll(it.Body)
	if err != nil {
		return false, err
	}
	it.Body = bytes.NewReader(body)
	have, err := root.ReadFile(name)
	if err != nil {
		return false, nil
	}
	return bytes.Equal(have, body), nil
}

const maxCompare = 8 << 20

func withHash(root *os.Root, p string, e Entry) Entry {
	if e.Mode.IsRegular() {
		if h, err := hashIn(root, p); err == nil {
			e.Hash = h
		}
	}
	return e
}
