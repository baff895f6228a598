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
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/internal/regfile"
)

// QuarantineDir is where protected changes wait, relative to the code dir.
const QuarantineDir = ".sbx/quarantine"

// HostDir configures one code dir on the host side.
type HostDir struct {
	Path      string   // absolute; the same path inside the sandbox
	Exclude   []string // patterns beyond DefaultExcludes and .sbxignore
	Protected []string // nil means DefaultProtected
	// Hooks are the paths, relative to Path, that the host's git runs or
	// reads as configuration: the directories it runs hooks from (its
	// effective core.hooksPath, when inside the code dir; "." for the code
	// dir itself), the config files it includes and the programs its config
	// names (session/gitconfig.go). The session reads them from the host's
	// git config; sync only uses them: they wait in quarantine like the
	// protected names, and the directories above them may not become
	// symlinks or files.
	Hooks []string
	// Prewalk starts the walk of the first round trip's scan in OpenHost,
	// beside the load of the state (a gob of the whole manifest, decoded
	// on one CPU), for a process that does not watch (sbx exec without its
	// host daemon): the walk needs no manifest, only the decisions after
	// it do (Scanner.finish). It is not used, and the scan is made afresh,
	// when an interrupted pull-back is applied to the tree first.
	Prewalk bool
}

// Host is the host side of the sync of one session: its manifests of the
// last synced state, kept in stateDir, and the round trips.
type Host struct {
	stateDir string
	dirs     []*hostDir
	st       hostState
	disk     int64 // what one pull may bring back, in bytes (0: no limit); see SetDiskLimit
	// Journal, when set, keeps every host file a pull-back overwrites or
	// deletes (see journal.go).
	Journal *Journal
	// MassDelete decides which pull-backs' deletions are held; nil means
	// DefaultMassDelete.
	MassDelete *MassDelete
	// open is the round begun on the watched manifests and not finished:
	// the next Begin undoes what its scan changed.
	open *Round
	// sig is the state file as this process last read or wrote it: a
	// watching process whose file another process rewrote (sbx exec on a
	// session sbx-mcp holds) reads it again and scans in full.
	sig string
	// rounds counts the round trips begun, for Verify.
	rounds uint64
	// fullNext asks the next round trip's helper for a full scan.
	fullNext bool
	// endsNext: the session ends after the next round trip (EndsAfterNext).
	endsNext bool
	// spoolMaybe is false once this process knows that no spool file is
	// there (it removed it, or made none since): an empty pull then skips
	// the unlink.
	spoolMaybe bool
	// log is the state's log as this process knows it (statelog.go).
	log stateLog
}

// Watch makes the host side keep its manifests current from file-system
// events (Watch), for a process that runs many round trips (sbx-mcp): a
// round trip then costs what changed on the host, not a walk of the whole
// tree. log is told why a full scan was needed; nil logs nothing.
func (h *Host) Watch(log *slog.Logger) {
	for _, d := range h.dirs {
		d.pre = nil // a watching scan makes its own walk
		if d.watch == nil {
			d.watch = NewWatch(d.cfg.Path, d.ex)
			d.watch.Log = log
		}
	}
}

// FullScanNext makes the next round trip scan both sides in full, whatever
// the watches saw (the last pull-back before a release).
func (h *Host) FullScanNext() {
	h.fullNext = true
	for _, d := range h.dirs {
		d.watch.Invalidate("a full scan was asked for")
	}
}

// EndsAfterNext says that the session ends after the next round trip (the
// last pull-back before a release): when nothing comes back, its Finish
// does not write the state, which no later round trip reads. It is a gob
// of the whole manifest, synced to disk: 3-30 ms of a one-command sbx exec
// on this machine's ext4. Whoever reads the state all the same (the release
// failed and a later process takes the sandbox on) finds the last one saved
// and pushes again what this process had pushed since, which the sandbox
// applies as no-ops. A round that brings changes back saves as ever: the
// pull's recovery after a crash needs the state.
func (h *Host) EndsAfterNext() { h.endsNext = true }

// Rounds counts the round trips begun by this Host.
func (h *Host) Rounds() uint64 { return h.rounds }

func (h *Host) watching() bool {
	for _, d := range h.dirs {
		if d.watch != nil {
			return true
		}
	}
	return false
}

// Close stops the watches.
func (h *Host) Close() {
	for _, d := range h.dirs {
		d.watch.Close()
		d.watch = nil
	}
}

// rollback undoes the scans of a round that did not finish.
func (h *Host) rollback() {
	r := h.open
	h.open = nil
	if r == nil {
		return
	}
	for _, i := range r.fromEmpty {
		if i < len(h.st.Manifests) {
			h.st.Manifests[i] = Manifest{}
			h.replaced(i)
		}
	}
	for i, d := range h.dirs {
		if i < len(r.undo) && r.undo[i] != nil && i < len(h.st.Manifests) {
			r.undo[i].Apply(h.st.Manifests[i])
			h.changing(i, r.undo[i].paths()...)
		}
		d.watch.Invalidate("the last round trip did not finish")
	}
}

type hostDir struct {
	cfg       HostDir
	watch     *Watch   // nil: every scan is a full one
	pre       *prewalk // the first scan's walk, started by OpenHost (HostDir.Prewalk)
	ex        *Matcher
	protected *protectedSet
	excludes  []string // what the helper is told
}

type hostState struct {
	Manifests []Manifest
	Seq       uint64 // the last round trip's number
	Ack       uint64 // the last round trip whose pull was applied
	Reset     bool   // the next round trip starts the sandbox side afresh
	// Skipped are, per code dir, the host paths the last scan could not
	// read (reported once).
	Skipped []map[string]string
	// Gen is the base's generation, which the records of its log name
	// (statelog.go); 0 in a state written before the log.
	Gen uint64
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
	// HostKept lists, one line each, host paths the sandbox removed or
	// replaced that had changed on the host meanwhile (or a host directory
	// recreated for the sandbox's changes): the host's version stays.
	HostKept []string
	// Held lists the host paths whose deletion by the sandbox waits for
	// sbx accept --deletions (a pull-back that would delete most of a code
	// dir, or git's core); HeldReason says why. Held deletions of earlier
	// commands that still wait are counted in HeldWaiting.
	Held        []string
	HeldReason  string
	HeldWaiting int
	// Journaled counts the host files this pull-back overwrote or deleted
	// after keeping them in the journal (sbx undo).
	Journaled int
	// JournalDropped says which earlier rounds of the journal this
	// pull-back's round pushed out (over journal_size).
	JournalDropped []string
	// Lost lists host paths of sandbox changes a failed pull-back did not
	// apply, as far as the pull was read, and LostCount how many changes
	// the sandbox sent (set by the caller that knows they will not be sent
	// again).
	Lost      []string
	LostCount int
}

// OpenHost loads the sync state of a session from stateDir.
func OpenHost(stateDir string, dirs []HostDir) (*Host, error) {
	h := &Host{stateDir: stateDir, spoolMaybe: true}
	for _, d := range dirs {
		if !filepath.IsAbs(d.Path) {
			return nil, fmt.Errorf("code dir %q is not absolute", d.Path)
		}
		pats := append(append([]string{}, DefaultExcludes...), d.Exclude...)
		// A regular file only, read without waiting, bounded: a cloned
		// repository's .sbxignore linked to /dev/zero or /dev/stdin was read
		// without end. One that is there but not such a file is an error,
		// not ignored: its patterns may keep secrets out of the sandbox.
		raw, err := regfile.Read(filepath.Join(d.Path, ".sbxignore"), true)
		if err == nil {
			pats = append(pats, ParseIgnore(string(raw))...)
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EISDIR) {
			return nil, err
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
	h.startPrewalks()
	if err := h.load(); err != nil || len(h.st.Manifests) != len(dirs) {
		h.st = hostState{Reset: true}
	}
	for len(h.st.Manifests) < len(dirs) {
		h.st.Manifests = append(h.st.Manifests, Manifest{})
	}
	h.noteLinks()
	return h, nil
}

// noteLinks tells each code dir's protected set the host's links the state
// knows, and forgets those it no longer holds.
func (h *Host) noteLinks() {
	for i, d := range h.dirs {
		m := h.st.Manifests[i]
		for p := range d.protected.linkTargets {
			if _, ok := m[p]; !ok {
				d.protected.noteHostEntry(p, Entry{}, true)
			}
		}
		for p, e := range m {
			if e.isLink() {
				d.protected.noteHostEntry(p, e, false)
			}
		}
	}
}

func (h *Host) statePath() string { return filepath.Join(h.stateDir, "sync.state") }

// stateBytesPerEntry is about what one entry takes in the state (a 100k
// file tree's is 6.3 MB): a prewalk sizes its manifest from the state's
// size before the state is read.
const stateBytesPerEntry = 56

// A prewalk is the walk of a code dir's first scan, running.
type prewalk struct {
	done chan struct{}
	w    *walker
}

// startPrewalks starts the walks of the code dirs that ask for one
// (HostDir.Prewalk), unless an interrupted pull-back waits (Begin applies
// it to the tree before it scans).
func (h *Host) startPrewalks() {
	if _, err := os.Lstat(h.pendingPath()); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	size := 0
	if fi, err := os.Stat(h.statePath()); err == nil {
		size = int(fi.Size() / stateBytesPerEntry)
	}
	for _, d := range h.dirs {
		if !d.cfg.Prewalk {
			continue
		}
		pw := &prewalk{done: make(chan struct{})}
		d.pre = pw
		sc := &Scanner{Exclude: d.ex}
		go func() {
			defer close(pw.done)
			pw.w = sc.walk(d.cfg.Path, size)
		}()
	}
}

// Prewalking says whether the first scan's walk, started by OpenHost for a
// code dir that asked for it (HostDir.Prewalk), is still held: the next
// round trip's scan takes the tree as that walk saw it.
// Like the Host's other methods, it is not safe beside them.
func (h *Host) Prewalking() bool {
	for _, d := range h.dirs {
		if d.pre != nil {
			return true
		}
	}
	return false
}

// takePrewalk returns the code dir's prewalk once it has ended, and forgets
// it: only the first scan uses it. Nil when there is none.
func (d *hostDir) takePrewalk() *walker {
	pw := d.pre
	d.pre = nil
	if pw == nil {
		return nil
	}
	<-pw.done
	return pw.w
}

// heldDir keeps the held deletions: beside the journal, which outlives the
// session (a deletion held by a session that ended can still be accepted).
func (h *Host) heldDir() string {
	if h.Journal != nil {
		return h.Journal.Dir
	}
	return h.stateDir
}
func (h *Host) spoolPath() string { return filepath.Join(h.stateDir, "pull.spool") }
func (h *Host) pendingPath() string {
	return filepath.Join(h.stateDir, "pull.pending")
}

func (h *Host) load() error {
	sig := h.stateSig()
	f, err := os.Open(h.statePath())
	if err != nil {
		return err
	}
	defer f.Close()
	h.sig = sig
	h.log = stateLog{}
	raw, err := readState(f)
	if err != nil {
		return err
	}
	err = gob.NewDecoder(bytes.NewReader(raw)).Decode(&h.st)
	if err != nil {
		// Written before the manifests had their own encoding (GobEncode).
		var old legacyHostState
		if gob.NewDecoder(bytes.NewReader(raw)).Decode(&old) == nil {
			h.st = hostState{Seq: old.Seq, Ack: old.Ack, Reset: old.Reset, Skipped: old.Skipped}
			for _, m := range old.Manifests {
				h.st.Manifests = append(h.st.Manifests, Manifest(m))
			}
			return nil
		}
		return err
	}
	return h.loadLog(int64(len(raw)))
}

// maxStateBytes bounds a state file's size as read: gob's own bound on a
// message (1 GiB), about 17 million entries. A helper's state is in the
// sandbox, where a command can make it a file of any size (a sparse one
// costs no disk); one over the bound is taken for unreadable, and a full
// scan follows, as for any state that cannot be read.
var maxStateBytes int64 = 1 << 30

var errStateTooBig = fmt.Errorf("sync state larger than %d bytes", maxStateBytes)

// readState reads a state file whole, up to maxStateBytes.
func readState(f io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err == nil && int64(len(raw)) > maxStateBytes {
		return nil, errStateTooBig
	}
	return raw, err
}

// legacyManifest is a manifest as gob's reflection writes it, the format
// of the state files before GobEncode: read, never written.
type legacyManifest map[string]Entry

// legacyHostState is hostState with its manifests in that format.
type legacyHostState struct {
	Manifests []legacyManifest
	Seq       uint64
	Ack       uint64
	Reset     bool
	Skipped   []map[string]string
}

// reloadIfChanged reads the state again when another process rewrote it
// since this one last read or wrote it: a process that watches keeps its
// manifests across round trips, and one that does not loaded the state
// when it opened the session, before it waited for the session's lock.
// What the watches saw no longer describes the manifests, so each scans in
// full; a prewalk, made beside the state as it was, is dropped (the other
// process's round trip may have written the tree while it walked).
func (h *Host) reloadIfChanged() {
	sig := h.stateSig()
	if sig == h.sig {
		return
	}
	for _, d := range h.dirs {
		d.pre = nil
	}
	h.st = hostState{}
	if err := h.load(); err != nil || len(h.st.Manifests) != len(h.dirs) {
		h.st = hostState{Reset: true}
		h.sig = sig
	}
	for len(h.st.Manifests) < len(h.dirs) {
		h.st.Manifests = append(h.st.Manifests, Manifest{})
	}
	h.noteLinks()
	for _, d := range h.dirs {
		d.watch.Invalidate("the session's sync state was written by another process")
	}
}

// save writes the state: what changed since the last save as a record of
// the state's log when this process has the copy of the manifests as last
// saved to compare with, else the whole state (statelog.go).
//
// durable fsyncs the record: without, a crash of the machine (not of the
// process: the page cache outlives it) may lose it, and the next process
// takes the state saved before, as for a round it did not save.
func (h *Host) save(durable bool) error {
	if h.appendLog(durable) {
		return nil
	}
	return h.saveWhole()
}

// SyncedDir reports whether dir, an absolute path, is a code dir or a
// directory the sync carries inside one: not excluded, and a directory on
// the host now, reached through no symlink. The sandbox then has it after
// the next push, unless something in the sandbox removes it meanwhile.
func (h *Host) SyncedDir(dir string) bool {
	for _, d := range h.dirs {
		rel, err := filepath.Rel(d.cfg.Path, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if rel == "." {
			fi, err := os.Lstat(dir)
			return err == nil && fi.IsDir()
		}
		rel = filepath.ToSlash(rel)
		if d.ex.ExcludedPath(rel, true) {
			return false
		}
		root, err := os.OpenRoot(d.cfg.Path)
		if err != nil {
			return false
		}
		defer root.Close()
		fi, err := root.Lstat(rel)
		if err != nil || !fi.IsDir() {
			return false
		}
		// os.Root follows symlinks inside the root: a link among the
		// parents would name another directory than the sandbox's.
		for p := path.Dir(rel); p != "."; p = path.Dir(p) {
			if fi, err := root.Lstat(p); err != nil || !fi.IsDir() {
				return false
			}
		}
		return true
	}
	return false
}

// Reset forgets the sandbox side: the next round trip pushes every file (a
// new sandbox starts empty).
func (h *Host) Reset() {
	h.open = nil
	for _, d := range h.dirs {
		d.watch.Invalidate("the sandbox side was reset")
	}
	h.st = hostState{Reset: true, Seq: h.st.Seq}
	for range h.dirs {
		h.st.Manifests = append(h.st.Manifests, Manifest{})
	}
	os.Remove(h.pendingPath())
	h.spoolMaybe = true
	h.removeSpool()
}

// Round is one round trip in progress.
type Round struct {
	h       *Host
	Request HelperRequest
	cur     []Manifest
	undo    []Undo // per watched dir: what its scan changed in place
	changes [][]Change
	spooled bool
	// last: the session ends after this round (Host.EndsAfterNext).
	last   bool
	report Report
	// rejected counts the rejected held deletions this round pushes back.
	rejected int
	// settled counts the hashes this round's scans verified (Scanner.Settled).
	settled int
	// seen lists (some of) the host paths of the pull's items.
	seen []string
	// fromEmpty lists the watched dirs whose scan filled an empty
	// manifest: a round that does not finish empties them again.
	fromEmpty []int
	// placed marks the code dirs whose push Place wrote into the
	// workspace: their patch on the push stream is empty.
	placed []bool
	// placedList is, per placed code dir, what Place wrote (the entries a
	// scan of the workspace would record), sent after its empty patch.
	placedList []Manifest
	// scanned is, per code dir scanned anew (a process that does not
	// watch), the manifest the scan was compared with and the paths where
	// the new one may differ from it (Scanner.Changed).
	scanned []scanned
	// packed is, per code dir whose scan deferred hashes
	// (Scanner.Deferred), the hashes the push took of what it sent.
	packed []*packHashes
}

// unreadHash is the hash a manifest records for a file the scan did not
// hash (Scanner.Deferred) and the push did not send whole (it was placed,
// or turned into something else, or the push stopped): it equals no
// content's, so the next scan that finds the file's stat unchanged hashes
// it and sends it again, and one that finds it changed sends it anyway.
const unreadHash = "unread"

// settleDeferred records in the manifests the hashes of the files whose
// scan left them unread: what the push sent, or unreadHash. It leaves
// r.packed as it is: the push's goroutine may still be reading it (a
// sandbox that answered before reading the whole push).
func (r *Round) settleDeferred() {
	for i, ph := range r.packed {
		if ph == nil || i >= len(r.cur) {
			continue
		}
		for p := range ph.want {
			e, ok := r.cur[i][p]
			if !ok || !e.Mode.IsRegular() || e.Hash != "" {
				continue
			}
			if h, sent := ph.take(p); sent {
				e.Hash = h
			} else {
				e.Hash = unreadHash
			}
			e.Verified = false
			r.cur[i][p] = e
		}
	}
}

// scanned is a code dir's scan as Round.scanned keeps it.
type scanned struct {
	from  Manifest
	paths []string
	ok    bool
}

// checkScanDiff, when set (by tests), is given each push's changes taken
// over the paths a scan listed, and Diff's of the whole manifests.
var checkScanDiff func(over, whole []Change)

// Seen lists the host paths the sandbox's pull named (at most maxSeen), as
// far as it was read: what is lost if it cannot be applied.
func (r *Round) Seen() []string { return r.seen }

const maxSeen = 1000

// Begin finishes a pull a crash interrupted, scans the host tree and
// prepares the round trip: its request and its push.
func (h *Host) Begin() (*Round, Report, error) {
	var recovered Report
	h.rollback()
	h.reloadIfChanged()
	h.rounds++
	if _, err := os.Lstat(h.pendingPath()); !errors.Is(err, fs.ErrNotExist) {
		// recover writes the tree: a walk made before it is not the tree's.
		for _, d := range h.dirs {
			d.pre = nil
		}
	}
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
	r := &Round{h: h, Request: HelperRequest{Version: ProtocolVersion, Seq: h.st.Seq, Ack: h.st.Ack, FullScan: h.fullNext}}
	h.fullNext = false
	r.last, h.endsNext = h.endsNext, false
	held, err := readHeldHead(h.heldDir())
	if err != nil {
		return nil, recovered, err
	}
	r.report.HeldWaiting = held.Waiting
	// Rejected deletions: the host's files go back into the sandbox.
	for _, x := range held.Rejected {
		for i, d := range h.dirs {
			if d.cfg.Path == x.Dir && CheckPath(x.Path) == nil {
				h.forgetIn(i, x.Path, true)
				if d.watch != nil && d.watch.n != nil {
					d.watch.n.touch([]string{x.Path})
				}
			}
		}
		r.rejected++
	}
	for i, d := range h.dirs {
		sc := &Scanner{Exclude: d.ex}
		var (
			cur     Manifest
			changes []Change
			err     error
		)
		if d.watch != nil && len(h.st.Manifests[i]) == 0 && h.st.Reset {
			// Nothing synced yet (a new sandbox): the scan is the
			// manifest, without Update's undo of every path (the round
			// that does not finish empties it again). Not for a code dir
			// that is synced and empty: Rescan makes the watch anew (a
			// close of an inotify instance costs the kernel milliseconds),
			// which every round trip of an empty code dir did.
			cur, err = sc.Rescan(d.cfg.Path, nil, d.watch)
			if err == nil {
				changes = Diff(h.st.Manifests[i], cur)
				h.st.Manifests[i] = cur
				h.replaced(i)
				for len(r.undo) <= i {
					r.undo = append(r.undo, nil)
				}
				r.undo[i] = nil
				r.fromEmpty = append(r.fromEmpty, i)
				h.open = r
			}
		} else if d.watch != nil {
			// In place: the round undoes it if it does not finish.
			cur = h.st.Manifests[i]
			var u Undo
			sc.DeferHash = true
			changes, u, err = sc.Update(d.cfg.Path, cur, d.watch)
			if err == nil && len(sc.Deferred) > 0 {
				for len(r.packed) <= i {
					r.packed = append(r.packed, nil)
				}
				r.packed[i] = &packHashes{want: make(map[string]bool, len(sc.Deferred))}
				for _, p := range sc.Deferred {
					r.packed[i].want[p] = true
				}
			}
			h.changing(i, u.paths()...)
			for len(r.undo) <= i {
				r.undo = append(r.undo, nil)
			}
			r.undo[i] = u
			h.open = r
		} else {
			// A new manifest, compared with the old over the paths the
			// scan lists as changed (for the push, and for the state's
			// log at the save: Finish).
			sc.Track = true
			prev := h.st.Manifests[i]
			if w := d.takePrewalk(); w != nil {
				cur, err = sc.finish(w, prev)
			} else {
				cur, err = sc.Scan(d.cfg.Path, prev)
			}
			if err == nil {
				changes = DiffOver(prev, cur, sc.Changed)
				if checkScanDiff != nil {
					checkScanDiff(changes, Diff(prev, cur))
				}
				for len(r.scanned) <= i {
					r.scanned = append(r.scanned, scanned{})
				}
				r.scanned[i] = scanned{from: prev, paths: sc.Changed, ok: true}
			}
		}
		if err != nil {
			return nil, recovered, fmt.Errorf("scan %s: %w", d.cfg.Path, err)
		}
		for len(h.st.Skipped) <= i {
			h.st.Skipped = append(h.st.Skipped, nil)
		}
		var fresh []Skip
		h.st.Skipped[i], fresh = newSkips(h.st.Skipped[i], sc.Skipped)
		for _, s := range fresh {
			r.report.Refused = append(r.report.Refused, Refusal{filepath.Join(d.cfg.Path, s.Path), "on the host: " + s.Reason + "; not sent into the sandbox either"})
		}
		r.settled += sc.Settled
		r.cur = append(r.cur, cur)
		r.changes = append(r.changes, changes)
		r.report.Pushed += len(r.changes[i])
		for _, c := range r.changes[i] {
			d.protected.noteHostEntry(c.Path, c.Entry, c.Deleted)
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
		changes := r.changes[i]
		placed := i < len(r.placed) && r.placed[i]
		if placed {
			changes = nil
		}
		var ph *packHashes
		if i < len(r.packed) {
			ph = r.packed[i]
		}
		if err := writePatch(w, d.cfg.Path, changes, ph); err != nil {
			return err
		}
		if placed && r.Request.Dirs[i].Placed > 0 {
			// (A dir that placed nothing is taken as an empty push.)
			if err := writePlacedList(w, r.placedList[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadPull receives the sandbox's changes, one patch per code dir, into a
// spool file, checking every entry first: a patch that breaks a rule is
// refused as a whole, and nothing of it is applied.
func (r *Round) ReadPull(rd io.Reader) error {
	f := &spool{path: r.h.spoolPath()}
	tee := io.TeeReader(rd, f)
	items := 0
	targets := map[string]string{} // the patch's symlinks, by code dir and path
	err := r.h.eachPull(tee, func(d *hostDir, root *os.Root, links map[string]bool, it *Item) error {
		items++
		if len(r.seen) < maxSeen {
			r.seen = append(r.seen, filepath.Join(d.cfg.Path, it.Path))
		}
		if rf := CheckPullBack(it.Path, it.Entry, it.Deleted); rf != nil {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: rf.Reason}
		}
		if d.ex.ExcludedPath(it.Path, it.Entry.Mode.IsDir()) {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: "an excluded path"}
		}
		if err := parentsPlain(root, links, it.Path, r.cur[r.h.indexOf(d)]); err != nil {
			return &PatchError{Path: filepath.Join(d.cfg.Path, it.Path), Reason: err.Error()}
		}
		if !it.Deleted && it.Entry.Mode.IsDir() {
			links[it.Path] = false // a directory replaces a host link there
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
		err = f.sync() // the spool is the journal of an interrupted pull
	}
	if cerr := f.close(); err == nil {
		err = cerr
	}
	if f.err != nil {
		err = f.err // what the tee's write failed on, not how the read ended
	}
	if f.f != nil {
		r.h.spoolMaybe = true
	}
	if err != nil || items == 0 {
		r.h.removeSpool() // and any left by an earlier round
		return err
	}
	r.spooled = true
	return nil
}

// spoolMem is how much of a pull the spool holds in memory before it
// creates its file.
const spoolMem = 64 << 10

// spool is ReadPull's copy of the pull stream. A pull that brings nothing
// back (an empty patch per code dir, about 1 KiB each) never becomes a
// file: the create, truncate and unlink of one per command were a good part
// of a warm command's host-side cost. A pull with items is on disk and
// synced before ReadPull returns, as before.
type spool struct {
	path string
	buf  []byte
	f    *os.File
	err  error
}

func (s *spool) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.f == nil && len(s.buf)+len(p) <= spoolMem {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	if err := s.open(); err != nil {
		return 0, err
	}
	n, err := s.f.Write(p)
	if err != nil {
		s.err = fmt.Errorf("spool the sandbox's changes: %w", err)
	}
	return n, err
}

// open creates the file and writes what was held in memory.
func (s *spool) open() error {
	if s.f != nil || s.err != nil {
		return s.err
	}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err == nil {
		if _, err = f.Write(s.buf); err != nil {
			f.Close()
		}
	}
	if err != nil {
		s.err = fmt.Errorf("spool the sandbox's changes: %w", err)
		return s.err
	}
	s.f, s.buf = f, nil
	return nil
}

func (s *spool) sync() error {
	if err := s.open(); err != nil {
		return err
	}
	return s.f.Sync()
}

func (s *spool) close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
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
// with the code dir's root, opened at the dir's first item (an empty
// patch, a warm command's, opens nothing).
func (h *Host) eachPull(rd io.Reader, fn func(*hostDir, *os.Root, map[string]bool, *Item) error) error {
	lim := h.pullLimits()
	for _, d := range h.dirs {
		var root *os.Root
		links := map[string]bool{}
		err := ReadPatch(rd, lim, func(it *Item) error {
			if root == nil {
				r, err := os.OpenRoot(d.cfg.Path)
				if err != nil {
					return err
				}
				root = r
			}
			return fn(d, root, links, it)
		})
		if root != nil {
			root.Close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parentsPlain refuses a path whose parent directories include a symlink,
// on the host now or earlier in the same patch: a write there would land
// elsewhere than its name says (.git through a link named otherwise, say).
// A host link where the sandbox was given a directory (base, the push of
// this round trip) is the host's change during the command: not refused, the
// pull-back puts the sandbox's side of that type conflict beside it.
func parentsPlain(root *os.Root, links map[string]bool, p string, base Manifest) error {
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if links[dir] {
			return fmt.Errorf("its parent %s is a symlink in the same patch", dir)
		}
		if made, ok := links[dir]; ok && !made {
			continue // a directory of the same patch
		}
		fi, err := root.Lstat(dir)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 && !base[dir].Mode.IsDir() {
			return fmt.Errorf("its parent %s is a symlink on the host", dir)
		}
	}
	return nil
}

// Finish applies the spooled pull (after the helper's reply) and saves the
// state. A crash during it leaves the spool, and the next Begin applies it
// again: each file ends up old or new, never half written.
// pushSaveMin is the size of a push from which the host saves its manifest
// even though nothing came back.
const pushSaveMin = 64

func (r *Round) Finish(reply HelperReply) (Report, error) {
	h := r.h
	rep := r.report
	rep.Refused = append(rep.Refused, reply.Kept...)
	rep.Conflicts = append(rep.Conflicts, reply.Conflicts...)
	if reply.Error != "" {
		return rep, fmt.Errorf("sandbox side of the sync: %s", reply.Error)
	}
	r.settleDeferred()
	// The sandbox now mirrors what was pushed.
	for i := range r.cur {
		if i < len(h.st.Manifests) && sameMap(r.cur[i], h.st.Manifests[i]) {
			continue // changed in place: each change said so
		}
		if i < len(r.scanned) && r.scanned[i].ok && i < len(h.st.Manifests) && sameMap(r.scanned[i].from, h.st.Manifests[i]) {
			h.rescanned(i, r.scanned[i].paths)
		} else {
			h.replaced(i)
		}
	}
	h.st.Manifests = r.cur
	if h.open == r {
		h.open = nil
	}
	if r.rejected > 0 {
		if hd, err := readHeld(h.heldDir()); err == nil && len(hd.Rejected) >= r.rejected {
			hd.Rejected = hd.Rejected[r.rejected:]
			writeHeld(h.heldDir(), hd)
		}
	}
	wasReset := h.st.Reset
	h.st.Reset = false
	if !r.spooled {
		// Nothing came back. A round that pushed something or settled
		// hashes saves what changed as a record of the state's log
		// (statelog.go; whole when the log cannot take it), fsynced only
		// when it is large or the sandbox's first: a record lost with the
		// machine's crash is a push a later process sends again, which
		// the sandbox applies as no-ops. It was once not saved at all
		// below 64 changes (a whole save cost a gob of the manifest), and
		// a later process that had lost it (sbx exec after the host
		// daemon ended) did not know that the sandbox had a file the host
		// then deleted: the file stayed in the sandbox, and came back to
		// the host with the sandbox's next change to it. The round before
		// the session's end saves nothing: no later round reads it.
		if r.last || !wasReset && r.settled == 0 && rep.Pushed == 0 {
			return rep, nil
		}
		return rep, h.save(wasReset || rep.Pushed >= pushSaveMin)
	}
	if err := os.WriteFile(h.pendingPath(), []byte(strconv.FormatUint(r.Request.Seq, 10)), 0o600); err != nil {
		return rep, err
	}
	if err := h.save(true); err != nil {
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
	// First pass: which code dirs' deletions are held.
	dels := make([][]string, len(h.dirs))
	puts := make([][]string, len(h.dirs))
	heads := make([]map[string]bool, len(h.dirs))
	err = h.eachPull(f, func(d *hostDir, _ *os.Root, _ map[string]bool, it *Item) error {
		i := h.indexOf(d)
		if heads[i] == nil {
			heads[i] = map[string]bool{}
		}
		noteHead(heads[i], it)
		if d.protected.protects(it.Path, it.Entry, it.Deleted) {
			return nil
		}
		if it.Deleted {
			dels[i] = append(dels[i], it.Path)
		} else {
			puts[i] = append(puts[i], it.Path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read spooled changes: %w", err)
	}
	md := DefaultMassDelete
	if h.MassDelete != nil {
		md = *h.MassDelete
	}
	states := make([]*applyState, len(h.dirs))
	var holds []HeldDeletion
	now := time.Now().UTC()
	for i, d := range h.dirs {
		st := &applyState{redirect: map[string]string{}, repo: repoState{heads: heads[i]}}
		states[i] = st
		if why := md.holdReason(h.st.Manifests[i], dels[i], puts[i]); why != "" {
			st.hold = map[string]bool{}
			rep.HeldReason = fmt.Sprintf("%s: %s", d.cfg.Path, why)
			for _, p := range dels[i] {
				st.hold[p] = true
				base := Manifest{}
				m := h.st.Manifests[i]
				for q, e := range m {
					if q == p || strings.HasPrefix(q, p+"/") {
						base[q] = e
					}
				}
				holds = append(holds, HeldDeletion{Dir: d.cfg.Path, Path: p, Reason: why, Time: now, Base: base})
				rep.Held = append(rep.Held, filepath.Join(d.cfg.Path, p))
			}
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if h.Journal != nil {
		h.Journal.begin("pull-back")
	}
	var roots *dirRoots
	err = h.eachPull(f, func(d *hostDir, root *os.Root, links map[string]bool, it *Item) error {
		i := h.indexOf(d)
		if roots == nil || roots.base != root {
			if roots != nil {
				roots.close()
			}
			roots = &dirRoots{base: root, m: map[string]*os.Root{}, verify: true}
		}
		states[i].roots = roots
		// What the pull-back changes in the manifest without an event
		// (a path marked unknown, what a removal kept) is seen again.
		d.watch.Touch(it.Path)
		return h.applyOne(i, d, states[i], it, rep)
	})
	if roots != nil {
		roots.close()
	}
	if jerr := h.Journal.commit(); err == nil && jerr != nil {
		err = jerr
	}
	if h.Journal != nil {
		rep.JournalDropped = append(rep.JournalDropped, h.Journal.Dropped...)
		h.Journal.Dropped = nil
	}
	if err != nil {
		return fmt.Errorf("bring back the sandbox's changes: %w", err)
	}
	if err := addHeld(h.heldDir(), holds); err != nil {
		return err
	}
	h.st.Ack = seq
	if err := h.save(true); err != nil {
		return err
	}
	os.Remove(h.pendingPath())
	h.spoolMaybe = true
	h.removeSpool()
	return nil
}

// removeSpool removes the spool file unless this process knows there is
// none.
func (h *Host) removeSpool() {
	if !h.spoolMaybe {
		return
	}
	if err := os.Remove(h.spoolPath()); err == nil || errors.Is(err, fs.ErrNotExist) {
		h.spoolMaybe = false
	}
}

func (h *Host) indexOf(d *hostDir) int {
	for i, x := range h.dirs {
		if x == d {
			return i
		}
	}
	return -1
}

// applyState is what the pull-back of one code dir carries from item to
// item.
type applyState struct {
	roots *dirRoots
	// redirect maps a sandbox directory whose host counterpart won a type
	// conflict to where the sandbox's version goes (its conflict copy):
	// what the patch holds below it follows it there.
	redirect map[string]string
	// hold lists the deletions held for sbx accept.
	hold map[string]bool
	// repo decides what would plant or change a git directory.
	repo repoState
}

// redirected returns where an item below a redirected directory goes.
func (st *applyState) redirected(p string) (string, bool) {
	if len(st.redirect) == 0 {
		return "", false
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if to, ok := st.redirect[dir]; ok {
			return to + p[len(dir):], true
		}
	}
	return "", false
}

// unknown marks a path's synced state unknown, with everything below it:
// the next push sends the host's version of all of it.
// forgetIn is forget on code dir i's manifest, each path it changes noted
// for the state's log.
func (h *Host) forgetIn(i int, p string, unknown bool) {
	m := h.st.Manifests[i]
	gone := []string{p}
	for q := range m {
		if q != p && strings.HasPrefix(q, p+"/") {
			gone = append(gone, q)
		}
	}
	h.changing(i, gone...)
	for _, q := range gone {
		delete(m, q)
	}
	if unknown {
		m[p] = Entry{Mode: fs.ModeIrregular}
	}
}

// put sets p in code dir i's manifest, noted for the state's log.
func (h *Host) put(i int, p string, e Entry) {
	h.changing(i, p)
	h.st.Manifests[i][p] = e
}

func forget(m Manifest, p string, unknown bool) {
	for q := range m {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m, q)
		}
	}
	if unknown {
		m[p] = Entry{Mode: fs.ModeIrregular}
	}
}

// nonDirAncestor finds the shallowest proper ancestor of p that is not a
// directory on the host: gone (exists false) or something else.
func nonDirAncestor(root *os.Root, p string) (anc string, exists bool, err error) {
	els := strings.Split(p, "/")
	for k := 1; k < len(els); k++ {
		a := strings.Join(els[:k], "/")
		fi, err := root.Lstat(a)
		if notExist(err) {
			return a, false, nil
		}
		if err != nil {
			return "", false, err
		}
		if !fi.IsDir() {
			return a, true, nil
		}
	}
	return "", false, nil
}

// The rules of applyOne, for a path the sandbox changed (see the table in
// rules_test.go): a path the host did not change since the last sync takes
// the sandbox's change, the host's earlier version kept in the journal. A
// path the host changed too keeps the host's version: a sandbox file is
// written beside as NAME.sbx-conflict, a sandbox directory becomes
// NAME.sbx-conflict/ with what the sandbox changed in it. A removal never
// removes what changed on the other side: a directory the sandbox removed
// loses on the host only what is unchanged there; a directory the host
// removed is made again for the sandbox's changes in it.
func (h *Host) applyOne(i int, d *hostDir, st *applyState, it *Item, rep *Report) error {
	roots := st.roots
	root := roots.base
	m := h.st.Manifests[i]
	full := filepath.Join(d.cfg.Path, it.Path)
	if d.protected.protects(it.Path, it.Entry, it.Deleted) || st.repo.plants(root, it.Path, it.Deleted) {
		if it.Deleted {
			if _, err := root.Lstat(it.Path); notExist(err) {
				// Only its quarantined copy has it (a rebase that stopped,
				// then finished in the sandbox): that copy is stale now.
				root.RemoveAll(path.Join(QuarantineDir, it.Path))
				return nil
			}
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
	if to, ok := st.redirected(it.Path); ok {
		if it.Deleted {
			return nil
		}
		if err := root.MkdirAll(path.Dir(to), 0o755); err != nil {
			return err
		}
		_, err := writeItem(root, it, to)
		return err
	}
	if it.Deleted && st.hold[it.Path] {
		return nil // waits for sbx accept
	}
	if it.Deleted || !it.Entry.Mode.IsDir() {
		roots.invalidate(it.Path) // a directory there goes away
	}
	if path.Dir(it.Path) != "." {
		anc, ancExists, err := nonDirAncestor(root, it.Path)
		if err != nil {
			return err
		}
		switch {
		case anc == "":
		case it.Deleted:
			// Already gone on the host with its parent.
			h.forgetIn(i, it.Path, false)
			return nil
		case ancExists:
			// The host made a directory of the sandbox's something else:
			// the host's stays, the sandbox's goes beside it.
			to := conflictName(root, anc)
			if err := root.Mkdir(to, 0o755); err != nil {
				return err
			}
			st.redirect[anc] = to
			h.put(i, anc, Entry{Mode: fs.ModeIrregular})
			rep.Conflicts = append(rep.Conflicts, filepath.Join(d.cfg.Path, to))
			rep.HostKept = append(rep.HostKept, fmt.Sprintf("%s: a directory in the sandbox, something else on the host now; the host's stays, the sandbox's changes in it are in %s", filepath.Join(d.cfg.Path, anc), filepath.Join(d.cfg.Path, to)))
			return h.applyOne(i, d, st, it, rep)
		default:
			// The host removed a directory the sandbox wrote into: made
			// again for the sandbox's changes.
			if err := root.MkdirAll(path.Dir(it.Path), 0o755); err != nil {
				return err
			}
			roots.invalidate(anc)
			rep.HostKept = append(rep.HostKept, fmt.Sprintf("%s: removed on the host while the sandbox changed files in it; made again for them", filepath.Join(d.cfg.Path, anc)))
		}
	}
	// Operations on the path go through its directory's root.
	dr, name := roots.split(it.Path)
	base, had := m[it.Path]
	now, exists, err := lstatEntry(dr, name, false)
	if err != nil {
		return err
	}
	if exists && !it.Deleted && objectFile(it.Path) && now.Mode.IsRegular() {
		// git never changes an object or a pack under its name: the
		// sandbox's rewrite stays there; the same bytes (a git that
		// freshened its mtime) are no change.
		same, err := sameObject(dr, name, it, now)
		if err != nil {
			return err
		}
		if !same {
			rep.Refused = append(rep.Refused, Refusal{full, errObjectRewrite})
		}
		return nil
	}
	if exists && !it.Deleted {
		same, err := sameContent(dr, name, it, now)
		if err != nil {
			return err
		}
		if same {
			// Already there (a redone pull, or the same edit on both sides).
			h.put(i, it.Path, withHash(dr, name, now))
			return nil
		}
	}
	hostChanged := exists != had || (exists && (now.Mode.Type() != base.Mode.Type() ||
		(!now.Mode.IsDir() && !sameIgnoringHash(base, now))))
	j := h.Journal
	switch {
	case it.Deleted && !exists:
		h.forgetIn(i, it.Path, false)
		return nil
	case it.Deleted && now.Mode.IsDir():
		removed, kept, err := removeTree(roots, d.cfg.Path, it.Path, m, j)
		if err != nil {
			return err
		}
		rep.Journaled += len(removed)
		h.forgetIn(i, it.Path, false)
		if len(kept) > 0 {
			rep.HostKept = append(rep.HostKept, fmt.Sprintf("%s: removed in the sandbox, but the host changed or added %s in it meanwhile; those stay", full, plural(len(kept), "path")))
			return nil
		}
		rep.Applied++
		return nil
	case it.Deleted && hostChanged:
		h.forgetIn(i, it.Path, true)
		rep.HostKept = append(rep.HostKept, fmt.Sprintf("%s: removed in the sandbox, but changed on the host meanwhile; the host's version stays", full))
		return nil
	case it.Deleted:
		if _, err := j.keep(d.cfg.Path, it.Path, dr, name, now, "deleted"); err != nil {
			return err
		}
		if _, err := writeItem(dr, it, name); err != nil {
			return err
		}
		if now.Mode.IsRegular() {
			rep.Journaled++
		}
		h.forgetIn(i, it.Path, false)
		rep.Applied++
		return nil
	case it.Entry.Mode.IsDir() && exists && !now.Mode.IsDir() && hostChanged:
		// A file (or link) on the host, changed or made there: it stays;
		// the sandbox's directory goes beside it.
		to := conflictName(dr, name)
		if err := dr.Mkdir(to, it.Entry.Mode.Perm()|0o700); err != nil {
			return err
		}
		rel := path.Join(path.Dir(it.Path), to)
		st.redirect[it.Path] = rel
		h.forgetIn(i, it.Path, true)
		rep.Conflicts = append(rep.Conflicts, filepath.Join(d.cfg.Path, rel))
		return nil
	case !it.Entry.Mode.IsDir() && exists && now.Mode.IsDir():
		// The sandbox made a file of a directory: what the host changed in
		// the directory meanwhile stays, and then so does the directory.
		removed, kept, err := removeTree(roots, d.cfg.Path, it.Path, m, j)
		if err != nil {
			return err
		}
		rep.Journaled += len(removed)
		if len(kept) > 0 {
			dr, name = roots.split(it.Path)
			aside := conflictName(dr, name)
			if _, err := writeItem(dr, it, aside); err != nil {
				return err
			}
			h.forgetIn(i, it.Path, true)
			rep.Conflicts = append(rep.Conflicts, filepath.Join(d.cfg.Path, path.Dir(it.Path), path.Base(aside)))
			rep.HostKept = append(rep.HostKept, fmt.Sprintf("%s: a directory the sandbox replaced, but the host changed or added %s in it meanwhile; the directory stays", full, plural(len(kept), "path")))
			return nil
		}
		h.forgetIn(i, it.Path, false)
		dr, name = roots.split(it.Path)
		exists = false
	case hostChanged && !it.Entry.Mode.IsDir():
		// Changed on both sides: the host's version stays; the sandbox's is
		// kept beside it, and the next push sends the host's to the sandbox.
		// Mark the path's base as unknown, so the next push sends the host's
		// version (or its deletion) whatever it is now.
		aside := conflictName(dr, name)
		if _, err := writeItem(dr, it, aside); err != nil {
			return err
		}
		h.forgetIn(i, it.Path, true)
		rep.Conflicts = append(rep.Conflicts, filepath.Join(d.cfg.Path, path.Dir(it.Path), path.Base(aside)))
		return nil
	}
	var kept *JournalEntry
	if exists && !now.Mode.IsDir() {
		if kept, err = j.keep(d.cfg.Path, it.Path, dr, name, now, "overwritten"); err != nil {
			return err
		}
		if now.Mode.IsRegular() {
			rep.Journaled++
		}
	}
	e, err := writeItem(dr, it, name)
	if err != nil {
		return err
	}
	if exists && !now.Mode.IsDir() {
		j.setAfter(kept, e)
	} else if !exists {
		j.created(d.cfg.Path, it.Path, e)
	}
	rep.Applied++
	h.put(i, it.Path, e)
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
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

// errObjectRewrite is why a rewrite of one of git's objects or packs is
// refused.
const errObjectRewrite = "git never changes an object or a pack under its name: a rewrite (content or mode) of one the host has is never brought back (it stays in the sandbox); the host's copy is untouched"

// sameObject reports whether the item has the same mode and bytes as the
// host's object file now, streaming both through the content hash.
func sameObject(root *os.Root, name string, it *Item, now Entry) (bool, error) {
	if !it.Entry.Mode.IsRegular() || it.Entry.Mode.Perm() != now.Mode.Perm() || it.Entry.Size != now.Size {
		return false, nil
	}
	in, err := hashReader(it.Body)
	if err != nil {
		return false, err
	}
	have, err := hashIn(root, name)
	if err != nil {
		return false, nil
	}
	return in == have, nil
}

func withHash(root *os.Root, p string, e Entry) Entry {
	if e.Mode.IsRegular() {
		if h, err := hashIn(root, p); err == nil {
			e.Hash = h
		}
	}
	return e
}
