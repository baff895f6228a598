package sync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The journal is the safety net under the pull-back: every host file that a
// pull-back overwrites or deletes is kept first (a hard link where the file
// system allows, a copy otherwise), and every file it creates is recorded,
// so that `sbx undo` can put the host tree back as it was before a command.
//
// Layout: Dir/<round>/entries.json and Dir/<round>/<n> for the kept
// contents, one <round> per pull-back that changed something, named
// <nanoseconds>-<what>-<bytes kept> so that they sort oldest first and the
// cap and the age limit need only the directory's listing. A round is
// written as <name>.tmp and renamed when complete; a .tmp left by a crash
// is removed by the next prune (the session's lock serializes writers).

// DefaultJournalSize is the journal's size cap when none is configured.
const DefaultJournalSize = 1 << 30

// JournalKeep is how long a journal's rounds are kept (also after the
// session ends).
const JournalKeep = 7 * 24 * time.Hour

// Journal is one session's journal.
type Journal struct {
	Dir string
	// Max caps the bytes the kept contents take; the oldest rounds go first.
	// Zero means DefaultJournalSize; less than zero keeps no content.
	Max int64

	cur     *journalRound
	written int64 // bytes kept in the current round
	// Dropped says, after a commit, which earlier rounds the cap made it
	// drop (sbx undo can no longer restore them): the pull-back reports it.
	Dropped []string
}

// JournalEntry is one host path a pull-back (or an undo) changed.
type JournalEntry struct {
	Dir  string `json:"dir"`  // the code dir
	Path string `json:"path"` // slash-separated, relative to Dir
	// Op is "overwritten", "deleted" or "created".
	Op string `json:"op"`
	// Before is what was there (Op overwritten or deleted): its type and
	// mode; Blob names the kept content of a file, Link a symlink's target.
	Before Entry  `json:"before"`
	Blob   string `json:"blob,omitempty"`
	// NotKept says why the content is not in the journal (over the cap).
	NotKept string `json:"not_kept,omitempty"`
	// After is what the change left there (nothing for a deletion), to tell
	// whether the host changed it since.
	After *Entry `json:"after,omitempty"`
}

// JournalRound is the record of one pull-back.
type JournalRound struct {
	ID      string         `json:"-"`
	Time    time.Time      `json:"time"`
	What    string         `json:"what"` // "pull-back", "undo", "accept"
	Entries []JournalEntry `json:"entries"`
	Undone  bool           `json:"undone,omitempty"`
}

type journalRound struct {
	JournalRound
	dir string
	n   int
}

// begin starts a round; nothing is written until the first entry.
func (j *Journal) begin(what string) {
	now := time.Now().UTC()
	id := fmt.Sprintf("%020d-%s", now.UnixNano(), what)
	j.cur = &journalRound{JournalRound: JournalRound{ID: id, Time: now, What: what}, dir: filepath.Join(j.Dir, id+".tmp")}
	j.written = 0
}

func (j *Journal) max() int64 {
	switch {
	case j.Max > 0:
		return j.Max
	case j.Max < 0:
		return 0 // keeps no content
	}
	return DefaultJournalSize
}

// keep records that the pull-back is about to overwrite or delete the
// entry at name in dir (the directory root holding it): a file's content
// is kept before it changes.
func (j *Journal) keep(codeDir, rel string, dir *os.Root, name string, before Entry, op string) (*JournalEntry, error) {
	if j == nil || j.cur == nil {
		return nil, nil
	}
	e := JournalEntry{Dir: codeDir, Path: rel, Op: op, Before: before}
	if before.Mode.IsRegular() {
		if j.max() == 0 {
			e.NotKept = "journal_size is 0: the journal keeps no content"
		} else {
			// Kept whatever its size: the newest round is always whole
			// (the cap drops older content, see prune).
			if err := os.MkdirAll(j.cur.dir, 0o700); err != nil {
				return nil, fmt.Errorf("journal: %w", err)
			}
			j.cur.n++
			blob := strconv.Itoa(j.cur.n)
			if err := keepFile(dir, name, filepath.Join(j.cur.dir, blob)); err != nil {
				return nil, fmt.Errorf("journal: keep %s before changing it: %w", path.Join(codeDir, rel), err)
			}
			e.Blob = blob
			j.written += before.Size
		}
	}
	j.cur.Entries = append(j.cur.Entries, e)
	return &j.cur.Entries[len(j.cur.Entries)-1], nil
}

// created records a path the pull-back created (nothing was there).
func (j *Journal) created(codeDir, rel string, after Entry) {
	if j == nil || j.cur == nil {
		return
	}
	a := after
	j.cur.Entries = append(j.cur.Entries, JournalEntry{Dir: codeDir, Path: rel, Op: "created", After: &a})
}

// setAfter records what a change left at the last kept path.
func (j *Journal) setAfter(e *JournalEntry, after Entry) {
	if e != nil {
		a := after
		e.After = &a
	}
}

// commit writes the round's record and applies the cap and the age limit.
func (j *Journal) commit() error {
	if j == nil || j.cur == nil {
		return nil
	}
	r := j.cur
	j.cur = nil
	if len(r.Entries) == 0 {
		return nil
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := writeRound(r.dir, &r.JournalRound); err != nil {
		return err
	}
	if err := os.Rename(r.dir, filepath.Join(j.Dir, fmt.Sprintf("%s-%d", r.ID, j.written))); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return j.prune()
}

func writeRound(dir string, r *JournalRound) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "entries.json.tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, "entries.json"))
}

// Rounds lists the journal's complete rounds, oldest first.
func (j *Journal) Rounds() ([]JournalRound, error) {
	ents, err := os.ReadDir(j.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []JournalRound
	for _, de := range ents {
		if _, _, ok := roundName(de.Name()); !ok || !de.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(j.Dir, de.Name(), "entries.json"))
		if err != nil {
			continue
		}
		var r JournalRound
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		r.ID = de.Name()
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

// prune drops incomplete rounds and rounds older than JournalKeep; then,
// while the kept contents are over the cap, first the kept versions that a
// pull-back of the same session wrote itself (churn: the version a round
// replaced is what an earlier round left there), oldest first, then the
// oldest rounds, each named in Dropped. The newest round is always kept
// whole, so sbx undo of the last command always works, and churn never
// pushes out a version the host had on its own. The listing alone decides
// when under the cap (a round's name carries its time and size); the
// rounds' records are read only when over it.
func (j *Journal) prune() error {
	ents, err := os.ReadDir(j.Dir)
	if err != nil {
		return nil
	}
	type sized struct {
		name string
		size int64
	}
	var rounds []sized
	var total int64
	for _, de := range ents {
		if !de.IsDir() {
			continue // held.json
		}
		name := de.Name()
		when, size, ok := roundName(name)
		if !ok || time.Since(when) > JournalKeep {
			os.RemoveAll(filepath.Join(j.Dir, name))
			continue
		}
		rounds = append(rounds, sized{name, size})
		total += size
	}
	sort.Slice(rounds, func(a, b int) bool { return rounds[a].name < rounds[b].name })
	if total <= j.max() || len(rounds) < 2 {
		return nil
	}
	// Churn first.
	type loaded struct {
		name  string
		size  int64
		r     JournalRound
		dirty bool
	}
	var all []*loaded
	for _, x := range rounds {
		l := &loaded{name: x.name, size: x.size}
		if raw, err := os.ReadFile(filepath.Join(j.Dir, x.name, "entries.json")); err == nil {
			json.Unmarshal(raw, &l.r)
		}
		all = append(all, l)
	}
	last := map[string]*JournalEntry{} // the latest entry of each path so far
	type victim struct {
		l *loaded
		e *JournalEntry
	}
	var churn []victim
	for k, l := range all {
		for i := range l.r.Entries {
			e := &l.r.Entries[i]
			key := e.Dir + "\x00" + e.Path
			if prev := last[key]; k < len(all)-1 && e.Blob != "" && prev != nil && prev.After != nil && sameVersion(*prev.After, e.Before) {
				churn = append(churn, victim{l, e})
			}
			last[key] = e
		}
	}
	for _, v := range churn {
		if total <= j.max() {
			break
		}
		os.Remove(filepath.Join(j.Dir, v.l.name, v.e.Blob))
		v.e.Blob = ""
		v.e.NotKept = "dropped to stay under journal_size: a version an earlier pull-back of this session wrote (the version before it is kept)"
		v.l.size -= v.e.Before.Size
		total -= v.e.Before.Size
		v.l.dirty = true
	}
	for _, l := range all {
		if !l.dirty {
			continue
		}
		dir := filepath.Join(j.Dir, l.name)
		if writeRound(dir, &l.r) != nil {
			continue
		}
		name := fmt.Sprintf("%s-%d", l.name[:strings.LastIndex(l.name, "-")], max(l.size, 0))
		if os.Rename(dir, filepath.Join(j.Dir, name)) == nil {
			l.name = name
		}
	}
	// Then the oldest rounds, said.
	for len(all) > 1 && total > j.max() {
		l := all[0]
		os.RemoveAll(filepath.Join(j.Dir, l.name))
		total -= l.size
		all = all[1:]
		kept := 0
		for _, e := range l.r.Entries {
			if e.Blob != "" {
				kept++
			}
		}
		j.Dropped = append(j.Dropped, fmt.Sprintf("the journal dropped the %s of %s (%s kept) to stay under journal_size (%d bytes): sbx undo can no longer restore them; raise journal_size to keep more",
			l.r.What, l.r.Time.Local().Format("2006-01-02 15:04:05"), plural(kept, "file"), j.max()))
	}
	return nil
}

// sameVersion: the same file version by type, size, mtime and inode (the
// change time moves when the journal links the inode).
func sameVersion(a, b Entry) bool {
	return a.Mode == b.Mode && a.Size == b.Size && a.MTime == b.MTime && a.Link == b.Link &&
		(a.Ino == 0 || b.Ino == 0 || a.Ino == b.Ino)
}

// roundName parses <nanoseconds>-<what>-<bytes>; ok is false for anything
// else (a .tmp round a crash left).
func roundName(name string) (when time.Time, size int64, ok bool) {
	i, k := strings.Index(name, "-"), strings.LastIndex(name, "-")
	if i <= 0 || k <= i || strings.HasSuffix(name, ".tmp") {
		return time.Time{}, 0, false
	}
	ns, err1 := strconv.ParseInt(name[:i], 10, 64)
	size, err2 := strconv.ParseInt(name[k+1:], 10, 64)
	if err1 != nil || err2 != nil || size < 0 {
		return time.Time{}, 0, false
	}
	return time.Unix(0, ns), size, true
}

// PruneJournals removes the rounds older than JournalKeep of every session
// under root (the sessions' journal root), and journals left empty.
func PruneJournals(root string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, de := range ents {
		j := &Journal{Dir: filepath.Join(root, de.Name())}
		j.prune()
		os.Remove(j.Dir) // only when empty
	}
}

// keepFile puts the content of name (in dir) at dst: a hard link when
// possible and name is the file's only link (the pull-back then replaces
// the name by rename, so the kept inode is never written again), else a
// copy.
func keepFile(dir *os.Root, name, dst string) error {
	if linkOut(dir, name, dst) == nil {
		return nil
	}
	in, err := dir.OpenFile(name, os.O_RDONLY|noFollow|noWait, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := isRegular(in); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// UndoResult says what an undo did.
type UndoResult struct {
	Restored []string // host paths put back as they were
	Removed  []string // host paths the pull-back had created, removed
	// KeptCurrent lists host paths that had changed since the pull-back:
	// their current version is in the journal too (sbx undo PATH again
	// brings it back).
	KeptCurrent []string
	// Missing lists paths whose earlier content the journal does not hold.
	Missing []string
}

// Undo restores the changes of the newest round that is not undone (paths
// empty), or each of the named paths (absolute host paths) from its newest
// entry. What it overwrites is journaled first, in a round of its own.
func (j *Journal) Undo(paths []string) (UndoResult, error) {
	var res UndoResult
	rounds, err := j.Rounds()
	if err != nil {
		return res, err
	}
	type pick struct {
		round int
		e     JournalEntry
	}
	var picks []pick
	if len(paths) == 0 {
		for i := len(rounds) - 1; i >= 0; i-- {
			if !rounds[i].Undone && rounds[i].What != "undo" {
				for _, e := range rounds[i].Entries {
					picks = append(picks, pick{i, e})
				}
				rounds[i].Undone = true
				if err := writeRound(filepath.Join(j.Dir, rounds[i].ID), &rounds[i]); err != nil {
					return res, err
				}
				break
			}
		}
		if picks == nil {
			return res, errors.New("the journal holds no command's changes to undo")
		}
	} else {
		for _, p := range paths {
			found := false
			for i := len(rounds) - 1; i >= 0 && !found; i-- {
				for k := len(rounds[i].Entries) - 1; k >= 0; k-- {
					e := rounds[i].Entries[k]
					if filepath.Join(e.Dir, filepath.FromSlash(e.Path)) == p {
						picks = append(picks, pick{i, e})
						found = true
						break
					}
				}
			}
			if !found {
				res.Missing = append(res.Missing, p+" (not in the journal)")
			}
		}
	}
	// Removals of what the pull-back created first, deepest first; then
	// restores, shallowest first (a directory before its files).
	sort.SliceStable(picks, func(a, b int) bool {
		ca, cb := picks[a].e.Op == "created", picks[b].e.Op == "created"
		if ca != cb {
			return ca
		}
		if ca {
			return picks[a].e.Path > picks[b].e.Path
		}
		return picks[a].e.Path < picks[b].e.Path
	})
	j.begin("undo")
	for _, pk := range picks {
		if err := j.undoOne(rounds[pk.round], pk.e, &res); err != nil {
			j.commit()
			return res, err
		}
	}
	return res, j.commit()
}

func (j *Journal) undoOne(r JournalRound, e JournalEntry, res *UndoResult) error {
	if err := CheckPath(e.Path); err != nil {
		return fmt.Errorf("journal entry %q: %w", e.Path, err)
	}
	full := filepath.Join(e.Dir, filepath.FromSlash(e.Path))
	root, err := os.OpenRoot(e.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	now, exists, err := lstatEntry(root, e.Path, false)
	if err != nil {
		return err
	}
	if exists && now.Mode.IsDir() && e.Op != "created" && e.Before.Mode.IsDir() {
		return nil // a directory is back by itself once its files are
	}
	if exists {
		if e.After == nil || !sameIgnoringHash(*e.After, now) {
			res.KeptCurrent = append(res.KeptCurrent, full)
		}
		if now.Mode.IsDir() {
			// Only an empty directory goes; one with content stays.
			if root.Remove(e.Path) != nil {
				res.KeptCurrent = append(res.KeptCurrent, full+" (a directory with content now; left as it is)")
				return nil
			}
		} else {
			parent, name := splitRoot(root, e.Path)
			if parent != root {
				defer parent.Close()
			}
			if _, err := j.keep(e.Dir, e.Path, parent, name, now, "overwritten"); err != nil {
				return err
			}
			if err := parent.Remove(name); err != nil {
				return err
			}
		}
	}
	if e.Op == "created" {
		res.Removed = append(res.Removed, full)
		return nil
	}
	if err := root.MkdirAll(path.Dir(e.Path), 0o755); err != nil && path.Dir(e.Path) != "." {
		return err
	}
	b := e.Before
	switch {
	case b.Mode.IsDir():
		if err := root.Mkdir(e.Path, b.Mode.Perm()|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case b.isLink():
		if err := root.Symlink(b.Link, e.Path); err != nil {
			return err
		}
	case e.Blob == "":
		res.Missing = append(res.Missing, full+" ("+e.NotKept+")")
		return nil
	default:
		src, err := os.Open(filepath.Join(j.Dir, r.ID, e.Blob))
		if err != nil {
			res.Missing = append(res.Missing, full+" (the journal lost it: "+err.Error()+")")
			return nil
		}
		defer src.Close()
		it := &Item{Path: e.Path, Entry: b, Body: src}
		if _, err := writeItem(root, it, e.Path); err != nil {
			return err
		}
	}
	res.Restored = append(res.Restored, full)
	return nil
}

// splitRoot opens p's parent directory as a root (the root itself for a
// top-level name).
func splitRoot(root *os.Root, p string) (*os.Root, string) {
	dir := path.Dir(p)
	if dir == "." {
		return root, p
	}
	r, err := root.OpenRoot(dir)
	if err != nil {
		return root, p
	}
	return r, path.Base(p)
}
