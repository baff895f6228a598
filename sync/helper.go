package sync

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/sbx-sh/sbx/internal/escape"
)

// The sandbox side of the protocol. One round trip per command: the host
// sends a HelperRequest and, on the push stream, one patch per code dir with
// its changes since the last sync; the helper applies them (Apply), the
// command runs, and the helper sends, on the pull stream, one patch per code
// dir with what changed in the sandbox (Collect). The helper runs inside the
// sandbox: the host trusts nothing it sends back.

// ProtocolVersion is checked on both sides.
const ProtocolVersion = 2

// HelperRequest is what the host tells the helper for one round trip.
type HelperRequest struct {
	Version int         `json:"version"`
	Dirs    []HelperDir `json:"dirs"`
	// Seq numbers this round trip; Ack is the last one whose pull the host
	// applied. A pull the host did not acknowledge is sent again.
	Seq uint64 `json:"seq"`
	Ack uint64 `json:"ack"`
	// StateDir is where the helper keeps its manifests, inside the sandbox.
	StateDir string `json:"state_dir"`
	// Files are written before the push is applied, outside the sync (the
	// sandbox's git config, rendered from allowlists): whole, each time.
	Files []HelperFile `json:"files,omitempty"`
	// FullScan makes a watching helper scan in full (the last pull-back
	// before a release: inotify never reports a write through a shared
	// mmap, which only a full scan sees).
	FullScan bool `json:"full_scan,omitempty"`
}

// HelperFile is one file the host writes into the sandbox.
type HelperFile struct {
	Path    string `json:"path"` // absolute
	Content []byte `json:"content"`
	// Exec makes it executable (0755; else 0644).
	Exec bool `json:"exec,omitempty"`
	// Required makes a failure to write it fail the round trip before the
	// command runs; else the failure is named in HelperReply.FileErrors.
	Required bool `json:"required,omitempty"`
}

// HelperDir is one code dir, at its path inside the sandbox.
type HelperDir struct {
	Path    string   `json:"path"`
	Exclude []string `json:"exclude,omitempty"`
	// Reset discards what the helper knows of this dir (a new sandbox, or
	// the host lost its manifest): the push then holds the whole tree.
	Reset bool `json:"reset,omitempty"`
	// Placed counts the entries the host wrote straight into this dir's
	// workspace (Round.Place: a new local sandbox, before its first
	// command) instead of sending them; with Reset only. Its patch is
	// empty and followed by the placed list (placedlist.go), which the
	// helper takes for its manifest; it refuses the round trip when the
	// list's count differs.
	Placed int `json:"placed,omitempty"`
}

// HelperReply is what the helper answers after the command.
type HelperReply struct {
	Seq uint64 `json:"seq"`
	// Sent counts the changes on the pull stream.
	Sent int `json:"sent"`
	// Kept lists sandbox changes that the rules keep in the sandbox.
	Kept []Refusal `json:"kept,omitempty"`
	// Conflicts lists sandbox files that a pushed host change replaced; the
	// sandbox's version was saved beside each as NAME.sbx-conflict.
	Conflicts []string `json:"conflicts,omitempty"`
	// FileErrors names the request's Files that could not be written.
	FileErrors []string `json:"file_errors,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// ConflictSuffix names the copy kept of the losing side of a conflict:
// NAME.sbx-conflict, or NAME.sbx-conflict-2, -3, ... when that is taken, so
// an earlier conflict's copy is never overwritten.
const ConflictSuffix = ".sbx-conflict"

func conflictName(r *os.Root, p string) string {
	name := p + ConflictSuffix
	for i := 2; ; i++ {
		if _, err := r.Lstat(name); err != nil {
			return name
		}
		name = fmt.Sprintf("%s%s-%d", p, ConflictSuffix, i)
	}
}

type helperState struct {
	// Manifest is the tree as the last Collect found it (after the push
	// of that round trip).
	Manifest Manifest
	// Undo, for the pull of round trip PendingSeq, restores from Manifest
	// the manifest the host acknowledged before that pull: the pull's
	// changes are forgotten, and so sent again, unless the host
	// acknowledges it (HelperRequest.Ack).
	Undo       Undo
	PendingSeq uint64
	// Pending is the format before Undo: the whole manifest after the
	// last pull, Manifest being the one before. Read, never written.
	Pending Manifest
	// Skipped are the paths the last scans could not read (Scanner.Skipped),
	// by path, with the reason: each is reported once, not every command.
	Skipped map[string]string
	// Gen names this state as a base: the records of its log that follow
	// it name it too (helperlog.go). 0: a state without a log.
	Gen uint64
}

// Helper runs one round trip inside the sandbox.
type Helper struct {
	req   HelperRequest
	dirs  []*helperDir
	reply HelperReply
}

type helperDir struct {
	d     HelperDir
	ex    *Matcher
	state helperState
	file  string
	dirty bool // the state differs from the file
	// saveLater: Collect left the save to release, which writes the state
	// after the reply, off the round trip (a long-lived process, or the
	// last round).
	saveLater bool
	// last: the last round before a release (req.FullScan). Its state is
	// written off the round trip, and only after the command: a process
	// that dies before it is written leaves the state of the round before
	// (a new sandbox: none), as a small push kept in memory does (Apply).
	last bool
	// saving is the last save started in the background (nil: none).
	saving *bgSave
	watch  *Watch
	// undone lists the paths a rollback of an unacknowledged pull changed.
	undone []string
	// log is what this process knows of the state's files; ops, what
	// Apply changed in the manifest, in order, for a record of the log
	// (helperlog.go). undoApplied and undoResolved: the load settled the
	// base's Undo (applied it, or dropped it), which the files do not
	// hold until a record or a save does.
	log                       helperLog
	ops                       []helperOp
	opsLost                   bool // Apply changed the manifest where ops does not say
	unsaved                   bool // Apply changed the manifest and saved nothing
	undoApplied, undoResolved bool
}

// NewHelper loads the helper's state for req. The host serializes the round
// trips of one sandbox.
func NewHelper(req HelperRequest) (*Helper, error) {
	if req.Version != ProtocolVersion {
		return nil, fmt.Errorf("sync protocol %d, the helper speaks %d", req.Version, ProtocolVersion)
	}
	if req.StateDir == "" {
		req.StateDir = "/run/sbx"
	}
	if err := os.MkdirAll(req.StateDir, 0o700); err != nil {
		return nil, err
	}
	h := &Helper{req: req, reply: HelperReply{Seq: req.Seq}}
	for _, d := range req.Dirs {
		if !filepath.IsAbs(d.Path) {
			return nil, fmt.Errorf("code dir %q is not absolute", d.Path)
		}
		ex, err := NewMatcher(append(append([]string{}, DefaultExcludes...), d.Exclude...))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(d.Path))
		hd := &helperDir{d: d, ex: ex, file: filepath.Join(req.StateDir, hex.EncodeToString(sum[:8])+".state")}
		hd.load(!d.Reset, strings.Join(d.Exclude, "\x00"))
		if hd.state.Manifest == nil {
			hd.state.Manifest = Manifest{}
		}
		acked := req.Ack != 0 && hd.state.PendingSeq == req.Ack
		// Acknowledged: the host has what the last pull sent. Not
		// acknowledged: forget it, so it is sent again. Either way this is
		// redone the same on every load until the next save, so it is not
		// saved by itself.
		if hd.state.Pending != nil {
			if acked {
				hd.state.Manifest = hd.state.Pending
			}
			hd.state.Pending = nil
			hd.watch.Invalidate("an old state file")
			hd.log.current = false
		}
		hd.undoResolved = hd.state.Undo != nil
		if hd.state.Undo != nil && !acked {
			hd.state.Undo.Apply(hd.state.Manifest)
			hd.undone = hd.state.Undo.paths()
			hd.undoApplied = true
		}
		hd.state.Undo, hd.state.PendingSeq = nil, 0
		if d.Reset {
			hd.dirty = true
			hd.watch.Invalidate("the host reset the sandbox side")
		}
		if req.FullScan {
			// The last round before a release (the last pull-back, or
			// the command's round standing for it): scanned in full
			// before and after the command, with no watch armed for a
			// next round that will not come.
			hd.watch.Close()
			hd.watch = nil
			hd.last = true
		}
		h.dirs = append(h.dirs, hd)
	}
	return h, nil
}

// live keeps, in a long-lived process that runs round trips one after
// another (the local worker), each state file's state in memory, with its
// watch: a round trip takes it (no decoding, no copy) and puts it back.
var live = struct {
	gosync.Mutex
	m map[string]*liveState
}{m: map[string]*liveState{}}

type liveState struct {
	sig   string // the files as this process last wrote or read them (helperStateSig)
	key   string // the excludes the watch was made with
	state helperState
	log   helperLog
	watch *Watch
	// verified: VerifyLive found it current (no round trip since).
	verified bool
	// saving, when set, is the last save of this state still being
	// written in the background: whoever takes the state waits for it,
	// then takes its sig.
	saving *bgSave
}

// A bgSave is a state file written in the background, after the one
// started before it for the same file (after).
type bgSave struct {
	done chan struct{}
	sig  string // the files as it wrote them, once done
	size int64  // the base's size, once done
}

// pendingSaves counts the saves being written in the background.
var pendingSaves gosync.WaitGroup

// beforeBackgroundSave, when set (tests), runs before each background
// save is written; false drops the save (its process died).
var beforeBackgroundSave func() bool

// saveBackground writes st, which nothing changes until the save is done
// (a snapshot, or a state that only the next load, which waits, takes).
func (hd *helperDir) saveBackground(st *helperState) {
	b := &bgSave{done: make(chan struct{})}
	after, file, path := hd.saving, hd.file, hd.d.Path
	hd.saving = b
	hd.dirty = false
	// A new base: the log goes once it is written. st is memory's state
	// as of now (or a copy of it): the files hold it from then on.
	newGen(st)
	hd.state.Gen = st.Gen
	hd.log = helperLog{gen: st.Gen, current: true}
	hd.undoResolved = false
	pendingSaves.Add(1)
	go func() {
		defer pendingSaves.Done()
		defer close(b.done)
		if after != nil {
			<-after.done
		}
		if beforeBackgroundSave != nil && !beforeBackgroundSave() {
			return
		}
		if err := writeState(file, st); err != nil {
			// The state in memory stands; the file is the last one
			// written, which a process that starts again takes.
			fmt.Fprintf(os.Stderr, "sbx sync: save the state of %s: %v\n", path, err)
		} else {
			removeLog(file)
		}
		fi, _ := os.Stat(file)
		if fi != nil {
			b.size = fi.Size()
		}
		b.sig = fileSig(fi)
	}()
}

// WaitSaves waits for the helper states still being written after their
// round trips (a long-lived process calls it before it exits).
func WaitSaves() { pendingSaves.Wait() }

// stateLoads counts the state files decoded and stateSaves those written
// (for tests).
var stateLoads, stateSaves, stateAppends atomic.Int64

func fileSig(fi os.FileInfo) string {
	if fi == nil {
		return ""
	}
	ctime, ino := statIDs(fi)
	return fmt.Sprintf("%d:%d:%d:%d", fi.Size(), fi.ModTime().UnixNano(), ctime, ino)
}

// load takes the state from memory when this process last wrote or read
// the file as it is now, else decodes it; with use false (a reset) only the
// watch is kept.
func (hd *helperDir) load(use bool, key string) {
	live.Lock()
	ls := live.m[hd.file]
	delete(live.m, hd.file)
	live.Unlock()
	if ls != nil && ls.saving != nil {
		<-ls.saving.done
		ls.sig, ls.log.base, ls.saving = ls.saving.sig, ls.saving.size, nil
	} else if ls == nil {
		// A round trip that failed after its Apply started a save (the
		// placed list's) left no state in memory: the file is read once
		// that save is written, not while.
		WaitSaves()
	}
	if ls != nil && ls.key != key {
		ls.watch.Close()
		ls = nil
	}
	if ls != nil {
		hd.watch = ls.watch
	} else if watchSupported && WatchHelper {
		hd.watch = NewWatch(hd.d.Path, hd.ex)
	}
	if !use {
		return
	}
	sig := helperStateSig(hd.file)
	if ls != nil && sig != "" && ls.sig == sig {
		hd.state, hd.log = ls.state, ls.log
		return
	}
	// Another process wrote it (or it is gone): what the watch saw is not
	// what this state was scanned from.
	hd.watch.Invalidate("the state file changed under this process")
	raw, err := readStateFile(hd.file)
	if err != nil {
		return
	}
	if st, ok := decodeHelperState(raw); ok {
		stateLoads.Add(1)
		n := readHelperLog(hd.logFile(), &st)
		hd.state = st
		hd.log = helperLog{gen: st.Gen, base: int64(len(raw)), size: n, current: true}
	}
}

// readStateFile reads a helper's state file, or its log: not waited on,
// not through a link, and only a regular file (the state dir is the
// sandbox's, and a command there can swap the file for a fifo), within
// maxStateBytes.
func readStateFile(file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|noFollow|noWait, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := isRegular(f); err != nil {
		return nil, err
	}
	return readState(f)
}

// decodeHelperState reads a helper's state file, in today's format or in
// the one before the manifests had their own encoding (GobEncode).
func decodeHelperState(raw []byte) (helperState, bool) {
	var st helperState
	if gob.NewDecoder(bytes.NewReader(raw)).Decode(&st) == nil {
		return st, true
	}
	var old struct {
		Manifest   legacyManifest
		Undo       Undo
		PendingSeq uint64
		Pending    legacyManifest
		Skipped    map[string]string
	}
	if gob.NewDecoder(bytes.NewReader(raw)).Decode(&old) != nil {
		return helperState{}, false
	}
	return helperState{Manifest: Manifest(old.Manifest), Undo: old.Undo, PendingSeq: old.PendingSeq, Pending: Manifest(old.Pending), Skipped: old.Skipped}, true
}

// release puts the state back in memory for the next round trip. A save
// Collect left to it is written now, in the background: the round trip's
// reply does not wait for it. A process that dies before it is written
// starts again from the last file, as after a small push kept in memory
// (Apply): what changed since goes back to the host, which finds it its
// own (no change) or, where it changed it again, keeps both.
func (hd *helperDir) release() {
	ls := &liveState{key: strings.Join(hd.d.Exclude, "\x00"), state: hd.state, watch: hd.watch}
	if hd.saveLater {
		hd.saveLater = false
		hd.saveBackground(&ls.state)
	}
	ls.log = hd.log
	if ls.saving = hd.saving; ls.saving == nil {
		ls.sig = helperStateSig(hd.file)
	}
	live.Lock()
	if old := live.m[hd.file]; old != nil && old.watch != hd.watch {
		old.watch.Close()
	}
	live.m[hd.file] = ls
	live.Unlock()
}

// helperSaveMin is the size of a push a helper that watches saves before
// its command (pushSaveMin; tests lower it, so that every push goes
// through the state's log).
var helperSaveMin = pushSaveMin

// WatchHelper makes a long-lived process's helpers watch their code dirs
// (Watch); the local worker sets it. A helper process that runs one round
// trip (the in-pod helper) gains nothing by it.
var WatchHelper = false

func (hd *helperDir) save() error {
	if hd.saving != nil {
		<-hd.saving.done // an older state must not land after this one
	}
	newGen(&hd.state)
	if err := writeState(hd.file, &hd.state); err != nil {
		hd.log = helperLog{}
		return err
	}
	removeLog(hd.file)
	hd.dirty = false
	hd.log = helperLog{gen: hd.state.Gen, current: true}
	if fi, _ := os.Stat(hd.file); fi != nil {
		hd.log.base = fi.Size()
	}
	hd.undoResolved = false
	return nil
}

// writeState writes st to file through a new temporary file.
func writeState(file string, st *helperState) error {
	tmp := file + ".tmp"
	// Made new: whatever a command left at the name (a fifo, whose open
	// for writing would wait for a reader; a link) goes first.
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow, 0o600)
	if err != nil {
		return err
	}
	err = gob.NewEncoder(f).Encode(st)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	stateSaves.Add(1)
	return nil
}

// Apply reads one patch per code dir from push and applies it. It reads
// nothing past the last patch's end (the caller checks with ExpectEnd when
// the stream should end there). A sandbox file
// that changed since the last sync (a background job wrote it) and that the
// host's patch replaces is first saved beside as NAME.sbx-conflict.
func (h *Helper) Apply(push io.Reader) error {
	for _, f := range h.req.Files {
		if err := writeWhole(f); err != nil {
			if f.Required {
				return fmt.Errorf("write %s: %w", f.Path, err)
			}
			h.reply.FileErrors = append(h.reply.FileErrors, fmt.Sprintf("%s: %v", f.Path, err))
		}
	}
	for _, hd := range h.dirs {
		if hd.d.Placed > 0 {
			if err := hd.applyPlaced(push); err != nil {
				h.abandon()
				return err
			}
			continue
		}
		if err := os.MkdirAll(hd.d.Path, 0o755); err != nil {
			return err
		}
		r, err := os.OpenRoot(hd.d.Path)
		if err != nil {
			return err
		}
		m := hd.state.Manifest
		racy := racyFor(hd.d.Path, time.Now())
		applied := 0
		fresh := hd.d.Reset // a new sandbox: nothing of its own to keep aside
		hd.ops, hd.opsLost = hd.ops[:0], fresh
		dirs := &dirRoots{base: r, m: map[string]*os.Root{}}
		// record enters what was written at p in the manifest.
		record := func(p string, e Entry) {
			if fresh {
				m[p] = e
				return
			}
			if e.Mode.IsRegular() && !racy.entry(e) {
				e.Hash = ""
			}
			if old, had := m[p]; had && old.Mode.IsDir() && !e.Mode.IsDir() {
				// A directory it replaced went with what it held (a walk
				// of the manifest: only when there was one).
				hd.forgetTree(m, p)
			}
			hd.put(m, p, e)
		}
		// Small files are written by par's workers (applypar.go); settle
		// waits for them and records what they wrote, before anything
		// that depends on the order of the stream.
		par := newParApply()
		settle := func() error {
			var first error
			for _, j := range par.wait() {
				if j.err != nil {
					if first == nil {
						first = fmt.Errorf("apply %s: %w", j.it.Path, j.err)
					}
					continue
				}
				record(j.it.Path, j.e)
			}
			return first
		}
		err = ReadPatch(push, DefaultLimits, func(it *Item) error {
			applied++
			if !parFile(it) || par.busyAt(it.Path) || par.failed.Load() {
				if err := settle(); err != nil {
					return err
				}
			}
			// What the push changes in the manifest without an event
			// (what a removal kept, forgotten) is seen again.
			hd.watch.Touch(it.Path)
			if fresh {
				// Each operation through the directory's own root: os.Root
				// would otherwise walk the whole path again for each one.
				sub, err := dirs.get(path.Dir(it.Path))
				if err != nil {
					return fmt.Errorf("apply %s: %w", it.Path, err)
				}
				dirfd := -1
				if parFile(it) {
					dirfd = dirs.fd(path.Dir(it.Path))
				}
				handed, e, err := par.submitAt(sub, dirfd, path.Base(it.Path), it, false)
				if err != nil {
					return fmt.Errorf("apply %s: %w", it.Path, err)
				}
				if !it.Deleted && !handed {
					m[it.Path] = e
				}
				return nil
			}
			// The host's change wins over the sandbox's, and never removes
			// what the sandbox changed meanwhile (a background job): a
			// parent the sandbox removed is made again, one it made a file
			// goes aside; a directory the host removed or replaced keeps
			// what changed in it (it goes back to the host with the pull).
			if _, known := dirs.m[path.Dir(it.Path)]; known {
				// Its directory's chain was checked for this push already.
			} else if anc, ancExists, err := nonDirAncestor(r, it.Path); err != nil {
				return fmt.Errorf("apply %s: %w", it.Path, err)
			} else if anc != "" {
				if err := settle(); err != nil {
					return err
				}
				if it.Deleted {
					hd.forgetTree(m, it.Path)
					return nil
				}
				if ancExists {
					aside := conflictName(r, anc)
					if err := r.Rename(anc, aside); err != nil {
						return fmt.Errorf("apply %s: move the sandbox's %s aside: %w", it.Path, anc, err)
					}
					h.reply.Conflicts = append(h.reply.Conflicts, filepath.Join(hd.d.Path, aside))
				}
				if err := r.MkdirAll(path.Dir(it.Path), 0o755); err != nil {
					return fmt.Errorf("apply %s: %w", it.Path, err)
				}
				dirs.invalidate(anc)
			}
			// The file itself through its directory's root (cached: the
			// push is sorted, so a directory's files come together), not
			// through r, which walks the whole path again for each of the
			// lstat, create, chtimes, rename and lstat of a file. Only a
			// directory whose whole chain nonDirAncestor found to be
			// directories in this push is opened; what the push changes at
			// a directory (made, removed, replaced, moved aside) forgets
			// what is cached at and below it.
			wr, name := r, it.Path
			if it.Deleted || it.Entry.Mode.IsDir() {
				dirs.invalidate(it.Path)
			} else if sub, err := dirs.get(path.Dir(it.Path)); err == nil {
				wr, name = sub, path.Base(it.Path)
			}
			cur, ok, err := lstatEntry(wr, name, false)
			if err == nil && ok && cur.Mode.IsDir() && (it.Deleted || !it.Entry.Mode.IsDir()) {
				if err := settle(); err != nil {
					return err
				}
				dirs.invalidate(it.Path)
				roots := &dirRoots{base: r, m: map[string]*os.Root{}}
				_, kept, rerr := removeTree(roots, hd.d.Path, it.Path, m, nil)
				roots.close()
				if rerr != nil {
					return fmt.Errorf("apply %s: %w", it.Path, rerr)
				}
				if len(kept) > 0 {
					hd.forgetTree(m, it.Path)
					if it.Deleted {
						return nil
					}
					aside := conflictName(r, it.Path)
					if err := r.Rename(it.Path, aside); err != nil {
						return fmt.Errorf("apply %s: move the sandbox's directory aside: %w", it.Path, err)
					}
					h.reply.Conflicts = append(h.reply.Conflicts, filepath.Join(hd.d.Path, aside))
				}
				cur, ok, err = lstatEntry(wr, name, false)
			}
			// What is at the name now, for writeSmallAt: known only
			// when the lstat worked and found no directory.
			exists, dirfd := ok, -1
			if err == nil && !(ok && cur.Mode.IsDir()) && !strings.Contains(name, "/") && parFile(it) {
				dirfd = dirs.fd(path.Dir(it.Path))
			}
			if err == nil && ok && !cur.Mode.IsDir() {
				base, had := m[it.Path]
				if !had || !sameIgnoringHash(base, cur) {
					aside := conflictName(wr, name)
					if err := wr.Rename(name, aside); err == nil {
						h.reply.Conflicts = append(h.reply.Conflicts, filepath.Join(hd.d.Path, path.Dir(it.Path), path.Base(aside)))
						exists = false
					}
				}
			}
			handed, e, err := par.submitAt(wr, dirfd, name, it, exists)
			if err != nil {
				return fmt.Errorf("apply %s: %w", it.Path, err)
			}
			if it.Deleted {
				hd.forgetTree(m, it.Path)
				return nil
			}
			if !handed {
				record(it.Path, e)
			}
			return nil
		})
		// What the workers still hold is written and recorded before the
		// push's result is known: on an error, the manifest has what is
		// on disk, as when each file was written in turn.
		if serr := settle(); err == nil {
			err = serr
		}
		par.close()
		dirs.close()
		r.Close()
		if err != nil {
			h.abandon()
			return err
		}
		if !hd.last && (hd.dirty || applied >= helperSaveMin || (applied > 0 && hd.watch == nil)) {
			// Kept for a process that dies before Collect (the command
			// killed it): the next one must not take what was applied
			// for the sandbox's own changes. A long-lived process (a
			// watch) keeps a small push in memory until its next save:
			// one that dies first, or another that reads the file, takes
			// those files for the sandbox's changes and sends them back,
			// where they are the host's own (no change) or, when the host
			// changed them again, a conflict copy beside its version.
			// Saving the whole manifest for each small push would cost
			// every command on a large tree a rewrite of its state. The
			// last round's is written after its command only (hd.last):
			// a release follows, and the last pull-back it then makes
			// when this process died finds the host's own files. A
			// process that watches appends what this push changed to the
			// state's log when the files held the state before it
			// (helperlog.go): at 100k files the whole state took 30-40 ms
			// of the round.
			if hd.watch == nil || hd.dirty || !hd.appendApply() {
				if err := hd.save(); err != nil {
					return err
				}
			}
		} else if applied > 0 {
			hd.unsaved = true // in memory only, until a save
		}
	}
	// Nothing is read past the last patch: on a remote backend's stream the
	// command's own stdin follows.
	return nil
}

// applyPlaced takes the workspace the host filled (Round.Place) for the
// sandbox side's manifest: the placed list that follows the dir's empty
// patch, what the host wrote there entry by entry, which must hold as many
// entries as the host placed. Nothing of the sandbox has run in the
// workspace yet, so it is the tree as it is: the helper hashes the files
// still racy (as a scan would) and arms its watch on the listed
// directories without reading the tree. A later full scan (the periodic
// verification, any fallback) compares the tree with it as with any
// manifest.
func (hd *helperDir) applyPlaced(push io.Reader) error {
	if !hd.d.Reset {
		return fmt.Errorf("apply %s: the host placed files into a workspace it synced before (only a new sandbox's first push is placed)", hd.d.Path)
	}
	err := ReadPatch(push, DefaultLimits, func(it *Item) error {
		return &PatchError{Path: it.Path, Reason: "sent on the push stream for a code dir the host placed"}
	})
	if err != nil {
		return err
	}
	m, err := readPlacedList(push)
	if err != nil {
		return fmt.Errorf("apply %s: %w", hd.d.Path, err)
	}
	// What a scan here would leave out (this side's excludes, a path over
	// PATH_MAX at this side's root) is not the tree the host placed.
	for p, e := range m {
		if hd.ex.Excluded(p, e.Mode.IsDir()) || len(hd.d.Path)+1+len(p) > maxFullPath {
			delete(m, p)
		}
	}
	if len(m) != hd.d.Placed {
		return fmt.Errorf("the host placed %d entries in %s, the sandbox side takes %d: the workspace is not the one the host filled (release the session and start again)", hd.d.Placed, hd.d.Path, len(m))
	}
	racy := racyFor(hd.d.Path, time.Now())
	var toHash []string
	for p, e := range m {
		if _, need := hashDecision(p, e, nil, racy); need && e.Mode.IsRegular() {
			toHash = append(toHash, p)
		}
	}
	if err := hashAll(hd.d.Path, m, nil, toHash, racy, 8); err != nil {
		return fmt.Errorf("hash %s after the host placed it: %w", hd.d.Path, err)
	}
	hd.watch.Arm(m)
	hd.state.Manifest = m
	hd.dirty = true
	if hd.last {
		return nil // saved after the command (Collect)
	}
	if hd.watch != nil {
		// A long-lived process writes a copy in the background, beside
		// the first command, which does not wait for it: one that dies
		// before it is written starts again from no state, and its first
		// round trip sends the whole tree back, which the host finds its
		// own (the same bytes: nothing written).
		hd.saveBackground(&helperState{Manifest: maps.Clone(m), Skipped: hd.state.Skipped})
		return nil
	}
	return hd.save()
}

// dirRoots caches an os.Root per directory of a tree being filled, so
// that each operation on a file does not walk its whole path again.
type dirRoots struct {
	base *os.Root
	m    map[string]*os.Root
	// fds holds, per directory, the directory itself opened through its
	// root, for writeSmallAt (fd).
	fds map[string]*os.File
	// verify checks, on each split, that the cached directory is still the
	// one at its path (the host's tree can change under a pull).
	verify bool
}

// split returns the root of p's directory and p's name in it; the base
// root and p itself when the directory cannot be opened (or was replaced).
func (d *dirRoots) split(p string) (*os.Root, string) {
	dir := path.Dir(p)
	if dir == "." {
		return d.base, p
	}
	r, err := d.get(dir)
	if err != nil {
		return d.base, p
	}
	if d.verify {
		a, err1 := r.Stat(".")
		b, err2 := d.base.Lstat(dir)
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			d.invalidate(dir)
			return d.base, p
		}
	}
	return r, path.Base(p)
}

// invalidate forgets p and everything cached below it (deleted or
// replaced by something else than a directory).
func (d *dirRoots) invalidate(p string) {
	for k, r := range d.m {
		if k == p || strings.HasPrefix(k, p+"/") {
			r.Close()
			delete(d.m, k)
		}
	}
	for k, f := range d.fds {
		if k == p || strings.HasPrefix(k, p+"/") {
			f.Close()
			delete(d.fds, k)
		}
	}
}

// fd returns a descriptor of the directory dir (opened through its root,
// so it is the directory the root holds, never something a link leads
// to), or -1 when it cannot be opened. It stays open until dir is
// invalidated or the roots closed: Apply does either only after its
// workers, which write through these descriptors, are done (settle),
// so that no write lands on a descriptor closed, or reused, meanwhile.
func (d *dirRoots) fd(dir string) int {
	if f, ok := d.fds[dir]; ok {
		return int(f.Fd())
	}
	r, err := d.get(dir)
	if err != nil {
		return -1
	}
	f, err := r.Open(".")
	if err != nil {
		return -1
	}
	if d.fds == nil {
		d.fds = map[string]*os.File{}
	}
	d.fds[dir] = f
	return int(f.Fd())
}

func (d *dirRoots) get(dir string) (*os.Root, error) {
	if dir == "." {
		return d.base, nil
	}
	if r, ok := d.m[dir]; ok {
		return r, nil
	}
	parent, err := d.get(path.Dir(dir))
	if err != nil {
		return nil, err
	}
	r, err := parent.OpenRoot(path.Base(dir))
	if err != nil {
		return nil, err
	}
	d.m[dir] = r
	return r, nil
}

func (d *dirRoots) close() {
	for _, r := range d.m {
		r.Close()
	}
	for _, f := range d.fds {
		f.Close()
	}
}

// sameIgnoringHash compares what a cheap stat can tell.
func sameIgnoringHash(a, b Entry) bool {
	a.Hash, b.Hash = "", ""
	return a.Same(b)
}

// Collect scans each code dir and writes what changed since the last sync to
// pull, one patch per dir, leaving out (and reporting) what the rules keep in
// the sandbox.
func (h *Helper) Collect(pull io.Writer) HelperReply {
	for _, hd := range h.dirs {
		sc := &Scanner{Exclude: hd.ex}
		if hd.watch != nil && hd.watch.n != nil && len(hd.undone) > 0 {
			hd.watch.n.touch(hd.undone) // rolled back: to be seen again
		}
		// The manifest becomes the tree as it is now, in place; u undoes
		// it unless the host acknowledges this pull.
		before := hd.state.Manifest
		var (
			changes []Change
			u       Undo
			err     error
		)
		if hd.watch == nil {
			// No watch (a helper process per command): the scan's result
			// becomes the manifest, not copied into the old one.
			var cur Manifest
			if cur, err = sc.Scan(hd.d.Path, before); err == nil {
				changes, u = Diff(before, cur), undoOf(before, cur)
				hd.state.Manifest = cur
			}
		} else {
			changes, u, err = sc.Update(hd.d.Path, hd.state.Manifest, hd.watch)
		}
		if err != nil {
			h.abandon()
			h.reply.Error = err.Error()
			return h.reply
		}
		// Whether the scan changed the manifest (a settled hash too): if
		// nothing is saved, the files no longer hold memory's state.
		scanned := len(u) > 0 || sc.Settled > 0
		for p, x := range u {
			if e, ok := hd.state.Manifest[p]; ok && x.Had && x.Entry.Same(e) {
				// Only its hash settled: nothing the host must
				// acknowledge. Undone, it would be hashed and saved again
				// at every round trip that pulls nothing (the host
				// acknowledges only a pull it applied).
				delete(u, p)
			}
		}
		if sc.Settled > 0 && hd.watch == nil {
			// Keep the verified hashes: no re-reading them next time (a
			// long-lived process keeps them in memory, saved with its
			// next save).
			hd.dirty = true
		}
		skipped, fresh := newSkips(hd.state.Skipped, sc.Skipped)
		if !maps.Equal(skipped, hd.state.Skipped) {
			hd.state.Skipped, hd.dirty = skipped, true
		}
		for _, s := range fresh {
			h.reply.Kept = append(h.reply.Kept, Refusal{filepath.Join(hd.d.Path, s.Path), s.Reason + "; it stays in the sandbox"})
		}
		var send []Change
		for _, c := range changes {
			if r := CheckPullBack(c.Path, c.Entry, c.Deleted); r != nil {
				r.Path = filepath.Join(hd.d.Path, r.Path)
				h.reply.Kept = append(h.reply.Kept, *r)
				continue
			}
			if old, had := previous(before, u, c.Path); had && !c.Deleted && objectFile(c.Path) && old.Mode.IsRegular() &&
				(c.Entry.Mode != old.Mode || c.Entry.Size != old.Size) {
				// The host refuses a same-size rewrite too (it has the
				// content to compare); this one is plain here.
				h.reply.Kept = append(h.reply.Kept, Refusal{filepath.Join(hd.d.Path, c.Path), errObjectRewrite})
				continue
			}
			if !c.Deleted && c.Entry.isLink() {
				// The host checks the target through its own links too;
				// checked here against the sandbox's tree (the host's plus
				// this command's changes), a refusal keeps the link here
				// instead of failing the whole pull there.
				if err := CheckLinkTree(c.Path, c.Entry.Link, treeLinks(hd.d.Path)); err != nil {
					h.reply.Kept = append(h.reply.Kept, Refusal{filepath.Join(hd.d.Path, c.Path), fmt.Sprintf("symlink to %s: %v", escape.Name(c.Entry.Link), err)})
					continue
				}
			}
			send = append(send, c)
		}
		if err := WritePatch(pull, hd.d.Path, send); err != nil {
			h.abandon()
			h.reply.Error = err.Error()
			return h.reply
		}
		h.reply.Sent += len(send)
		if len(u) > 0 {
			hd.state.Undo, hd.state.PendingSeq = u, h.req.Seq
		}
		// Else nothing to acknowledge (what changed was kept here, and is
		// undone and reported again next time, as the state file says):
		// the file stays as it is.
		if len(send) > 0 || hd.dirty {
			if hd.watch != nil || hd.last {
				// A long-lived process, or the last round: written after
				// the reply (release).
				hd.saveLater = true
			} else if err := hd.save(); err != nil {
				h.abandon()
				h.reply.Error = err.Error()
				return h.reply
			}
		} else if scanned || hd.unsaved || hd.undoResolved {
			hd.log.current = false
		}
	}
	for _, hd := range h.dirs {
		hd.release()
	}
	return h.reply
}

// previous is what the manifest held at p before Update changed it in
// place (u records each path it changed).
func previous(m Manifest, u Undo, p string) (Entry, bool) {
	if x, ok := u[p]; ok {
		return x.Entry, x.Had
	}
	e, ok := m[p]
	return e, ok
}

// abandon drops what this process keeps of the helper's state: the next
// round trip decodes the state file and scans in full.
func (h *Helper) abandon() {
	for _, hd := range h.dirs {
		hd.watch.Close()
		hd.watch = nil
	}
}

// newSkips returns the skipped paths to remember (now's) and those of now
// not reported before.
func newSkips(before map[string]string, now []Skip) (map[string]string, []Skip) {
	var fresh []Skip
	var keep map[string]string
	for _, s := range now {
		if keep == nil {
			keep = map[string]string{}
		}
		keep[s.Path] = s.Reason
		if before[s.Path] != s.Reason {
			fresh = append(fresh, s)
		}
	}
	return keep, fresh
}

// treeLinks looks symlinks up under root for CheckLinkTree.
func treeLinks(root string) func(string) (string, bool) {
	return func(q string) (string, bool) {
		p := filepath.Join(root, filepath.FromSlash(q))
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return "", false
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "/", true // unreadable: counted as leaving
		}
		return t, true
	}
}

// Reply is the reply so far (for a round trip that failed before Collect).
func (h *Helper) Reply() HelperReply { return h.reply }

// writeWhole writes one of the request's files: atomically, 0644 (0755 for
// Exec), its directory made when missing.
func writeWhole(f HelperFile) error {
	if !filepath.IsAbs(f.Path) {
		return fmt.Errorf("not an absolute path")
	}
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".sbx-file-*")
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if f.Exec {
		mode = 0o755
	}
	_, err = tmp.Write(f.Content)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
