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
	"strings"
	"time"
)

// A pull-back whose deletions would remove most of a code dir (rm -rf .) or
// git's core is not applied as it is: its deletions are held (held.json,
// beside the session's journal, so that they outlive the session) until the
// user accepts them (sbx accept --deletions) or rejects them (sbx accept
// --reject-deletions); its other
// changes (new and changed files, each journaled) are applied. While held,
// the host keeps the files and the sync's record still says the sandbox has
// them, so nothing is pushed back into the sandbox on its own; a host edit to
// one goes in as any host edit does. Accepting deletes, on the host, what is
// unchanged since the sandbox deleted it (and keeps in the journal what it
// deletes); rejecting makes the next command push the files back into the
// sandbox.

// MassDelete is the rule that holds a pull-back's deletions.
type MassDelete struct {
	// Min is the least number of files a held deletion removes when it
	// removes more than half of a code dir's files (all of them when at least
	// two is held too). Zero or less turns the rule off (git's core is still
	// held).
	Min int
}

// DefaultMassDelete holds a deletion of more than half of a code dir's
// files, 20 or more, or of all of them.
var DefaultMassDelete = MassDelete{Min: 20}

// gitCore is what git cannot work without.
var gitCore = []string{".git/objects", ".git/refs", ".git/HEAD"}

// objectFile reports whether p is one of git's objects or packs: a loose
// object (.git/objects/xx/...) or a pack file (.git/objects/pack/pack-*).
// git never changes one under its name (it writes new ones and deletes old
// ones), so a sandbox that rewrites one is refused, and one that deletes all
// of them is held.
func objectFile(p string) bool {
	rest, ok := strings.CutPrefix(p, ".git/objects/")
	if !ok {
		return false
	}
	dir, name, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return false
	}
	if dir == "pack" {
		return strings.HasPrefix(name, "pack-")
	}
	return len(dir) == 2 && isHex(dir)
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// holdReason decides, for one code dir whose last synced manifest is m,
// whether the deletions dels (paths as in a patch: a directory stands for
// everything below it) are held, and why. puts are the patch's other paths.
// It is "" when they apply.
func (md MassDelete) holdReason(m Manifest, dels, puts []string) string {
	if len(dels) == 0 {
		return ""
	}
	gone := map[string]bool{}
	for _, d := range dels {
		gone[d] = true
	}
	under := func(p string) bool {
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if gone[q] {
				return true
			}
		}
		return false
	}
	for _, c := range gitCore {
		if under(c) {
			return fmt.Sprintf("it deletes git's %s", c)
		}
	}
	var total, deleted, objects, objectsDeleted int
	for p, e := range m {
		if e.Mode.IsDir() {
			continue
		}
		if strings.HasPrefix(p, ".git/") {
			if objectFile(p) {
				objects++
				if under(p) {
					objectsDeleted++
				}
			}
			continue
		}
		total++
		if under(p) {
			deleted++
		}
	}
	if objects > 0 && objectsDeleted == objects {
		// Even with a pack written back: the host cannot tell the new pack
		// of a git gc from garbage, and it keeps both until the user says.
		return fmt.Sprintf("it deletes all %d of git's objects and packs (.git/objects)", objects)
	}
	if md.Min <= 0 {
		return ""
	}
	switch {
	case deleted == total && total >= 2:
		return fmt.Sprintf("it deletes all %d files of the code dir", total)
	case deleted*2 > total && deleted >= md.Min:
		return fmt.Sprintf("it deletes %d of the code dir's %d files", deleted, total)
	}
	return ""
}

// HeldDeletion is one deletion the sandbox made that waits.
type HeldDeletion struct {
	Dir    string    `json:"dir"`  // the code dir
	Path   string    `json:"path"` // relative; a directory stands for its tree
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
	// Base is what the host had at and below Path when the sandbox deleted
	// it: accepting deletes only what is still the same.
	Base Manifest `json:"base"`
}

// held is the state file of the held deletions.
type held struct {
	// Head is what Begin reads of the file at every round trip, first in
	// it so that the rest is not read (readHeldHead); writeHeld sets it.
	// A file an older build wrote has none.
	Head *heldHead      `json:"head,omitempty"`
	Held []HeldDeletion `json:"held,omitempty"`
	// Rejected deletions make the next round trip push the host's files
	// back into the sandbox.
	Rejected []HeldDeletion `json:"rejected,omitempty"`
}

func heldPath(dir string) string { return filepath.Join(dir, "held.json") }

func readHeld(stateDir string) (held, error) {
	var h held
	raw, err := os.ReadFile(heldPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("parse %s: %w", heldPath(stateDir), err)
	}
	return h, nil
}

// heldHead is what Begin needs of the held deletions at every round trip:
// how many wait, and where the rejected ones are; not their bases, whole
// manifests in JSON that a held deletion of a large tree (rm -rf
// node_modules) makes megabytes of.
type heldHead struct {
	Waiting  int         `json:"waiting"`
	Rejected []heldPlace `json:"rejected,omitempty"`
}

// heldPlace is where a held deletion is: its code dir and path.
type heldPlace struct {
	Dir  string `json:"dir"`
	Path string `json:"path"`
}

// readHeldHead reads held.json's head, its first member, and stops there
// (BenchmarkReadHeld: 130 ms for the whole file of one held deletion of
// 100k files). A file without one, from an older build, is read through
// for the same facts.
func readHeldHead(stateDir string) (heldHead, error) {
	var h heldHead
	f, err := os.Open(heldPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		if t, err := dec.Token(); err == nil && t == "head" {
			if err := dec.Decode(&h); err == nil {
				return h, nil
			}
		}
	}
	// No head: the whole file, for the same facts.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return heldHead{}, err
	}
	var whole struct {
		Held     []struct{}  `json:"held,omitempty"`
		Rejected []heldPlace `json:"rejected,omitempty"`
	}
	if err := json.NewDecoder(f).Decode(&whole); err != nil {
		return heldHead{}, fmt.Errorf("parse %s: %w", heldPath(stateDir), err)
	}
	h = heldHead{Waiting: len(whole.Held), Rejected: whole.Rejected}
	return h, nil
}

func writeHeld(stateDir string, h held) error {
	p := heldPath(stateDir)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	if len(h.Held) == 0 && len(h.Rejected) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	head := &heldHead{Waiting: len(h.Held)}
	for _, x := range h.Rejected {
		head.Rejected = append(head.Rejected, heldPlace{x.Dir, x.Path})
	}
	h.Head = head
	raw, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p+".tmp", raw, 0o600); err != nil {
		return fmt.Errorf("save held deletions: %w", err)
	}
	return os.Rename(p+".tmp", p)
}

// addHeld records new held deletions (a redone pull records them once).
func addHeld(stateDir string, add []HeldDeletion) error {
	if len(add) == 0 {
		return nil
	}
	h, err := readHeld(stateDir)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, x := range h.Held {
		have[x.Dir+"\x00"+x.Path] = true
	}
	for _, x := range add {
		if !have[x.Dir+"\x00"+x.Path] {
			h.Held = append(h.Held, x)
		}
	}
	return writeHeld(stateDir, h)
}

// Held lists the deletions waiting in dir (a session's journal dir).
func Held(stateDir string) ([]HeldDeletion, error) {
	h, err := readHeld(stateDir)
	return h.Held, err
}

// HeldFiles lists the files (host paths) a held deletion would remove.
func (d HeldDeletion) HeldFiles() []string {
	var out []string
	for p, e := range d.Base {
		if !e.Mode.IsDir() {
			out = append(out, filepath.Join(d.Dir, filepath.FromSlash(p)))
		}
	}
	sort.Strings(out)
	return out
}

// AcceptResult says what accepting held deletions did.
type AcceptResult struct {
	Deleted []string // host paths removed (kept in the journal)
	Kept    []string // host paths changed since, left in place
}

// AcceptDeletions applies the held deletions kept in dir (the caller holds
// the session's lock): what is unchanged since the sandbox deleted it goes,
// kept in the journal j first.
func AcceptDeletions(stateDir string, j *Journal) (AcceptResult, error) {
	var res AcceptResult
	h, err := readHeld(stateDir)
	if err != nil {
		return res, err
	}
	if len(h.Held) == 0 {
		return res, errors.New("no deletions are held for this session")
	}
	if j != nil {
		j.begin("accept")
	}
	for len(h.Held) > 0 {
		d := h.Held[0]
		if err := CheckPath(d.Path); err != nil {
			return res, fmt.Errorf("held deletion %q: %w", d.Path, err)
		}
		root, err := os.OpenRoot(d.Dir)
		if err != nil {
			return res, fmt.Errorf("open code dir: %w", err)
		}
		roots := &dirRoots{base: root, m: map[string]*os.Root{}, verify: true}
		del, kept, err := removeTree(roots, d.Dir, d.Path, d.Base, j)
		roots.close()
		root.Close()
		if err != nil {
			j.commit()
			writeHeld(stateDir, h)
			return res, err
		}
		res.Deleted = append(res.Deleted, del...)
		res.Kept = append(res.Kept, kept...)
		h.Held = h.Held[1:]
	}
	if err := j.commit(); err != nil {
		return res, err
	}
	return res, writeHeld(stateDir, h)
}

// RejectDeletions drops the held deletions: the host keeps the files and the
// next round trip pushes them back into the sandbox. It returns how many
// deletions it dropped.
func RejectDeletions(stateDir string) (int, error) {
	h, err := readHeld(stateDir)
	if err != nil {
		return 0, err
	}
	n := len(h.Held)
	if n == 0 {
		return 0, errors.New("no deletions are held for this session")
	}
	h.Rejected = append(h.Rejected, h.Held...)
	h.Held = nil
	return n, writeHeld(stateDir, h)
}

// removeTree removes p (a file, symlink or directory tree) from the host,
// but only what is unchanged since base recorded it: anything new or changed
// on the host stays, and so do the directories holding it. What it removes
// is kept in j first. It returns the host paths it removed and kept.
func removeTree(roots *dirRoots, codeDir, p string, base Manifest, j *Journal) (removed, kept []string, err error) {
	full := filepath.Join(codeDir, filepath.FromSlash(p))
	dr, name := roots.split(p)
	now, exists, err := lstatEntry(dr, name, false)
	if err != nil || !exists {
		return nil, nil, err
	}
	was, had := base[p]
	if !now.Mode.IsDir() {
		if !had || now.Mode.Type() != was.Mode.Type() || !sameIgnoringHash(was, now) {
			return nil, []string{full}, nil
		}
		if _, err := j.keep(codeDir, p, dr, name, now, "deleted"); err != nil {
			return nil, nil, err
		}
		if err := removeIn(dr, name); err != nil && !notExist(err) {
			return nil, nil, fmt.Errorf("remove %s: %w", full, err)
		}
		return []string{full}, nil, nil
	}
	sub, err := roots.get(p)
	if err != nil {
		return nil, nil, err
	}
	f, err := sub.Open(".")
	if err != nil {
		return nil, nil, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("read directory %s: %w", full, err)
	}
	sort.Strings(names)
	for _, n := range names {
		r, k, err := removeTree(roots, codeDir, p+"/"+n, base, j)
		if err != nil {
			return removed, kept, err
		}
		removed = append(removed, r...)
		kept = append(kept, k...)
	}
	if len(kept) > 0 || !had || !was.Mode.IsDir() {
		if len(kept) == 0 {
			kept = append(kept, full+"/")
		}
		return removed, kept, nil
	}
	roots.invalidate(p)
	dr, name = roots.split(p)
	if err := removeIn(dr, name); err != nil && !notExist(err) {
		return removed, append(kept, full+"/"), nil
	}
	if _, err := j.keep(codeDir, p, dr, name, now, "deleted"); err != nil {
		return removed, kept, err
	}
	return removed, kept, nil
}
