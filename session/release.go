package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/cache"
	"github.com/sbx-sh/sbx/internal/workroot"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// The end of a session, made cheap for the common case of `sbx exec`
// without --keep: one command, then the release.
//
// The final pull folded into the command's round. Release's last pull-back
// (finalPull) exists for what the command's own pull-back could not see: a
// process still running in the sandbox, and writes no event reported (a
// shared mmap), which only a full scan finds. When the caller says that the
// session is released right after this command (LastCommand), that round is
// made the full-scan one on both sides; once it has come back whole, with
// no other round trip since (a background job's end is one), nothing can
// have changed in the sandbox: every backend ends what a command started
// with the command (internal/runner's KillTree runs after the command's
// exit and before its pull-back), so Release skips the second round trip.
// Any doubt (the round failed, a job ran, another round came between)
// keeps the final pull.
//
// The workspaces removed after the release. A workspace holds the whole
// tree (thousands of files), and unlinking them costs from tens of
// milliseconds to seconds on a busy disk. Manager.release renames the
// session's work dir aside into <root>.trash (one rename, on the same
// file system), removes the rest of the state dir, and hands the trash
// entry to the backend's remover (a detached process, trashRemover) when
// it has one, else removes it in line. An entry whose remover was killed
// is removed by the next sbx that opens a session (sweepTrash): an entry
// is locked (flock) by whoever removes it, so an unlocked one is an
// orphan.
//
// Workspaces in memory go the same way, into the trash dir of their root
// on the tmpfs (memoryTrash): the removal costs the CPU alone, but tens of
// milliseconds of a one-command session's wall time. The next session
// whose workspaces go to memory sweeps that trash dir.

// trashRemover is a Provider that can remove a directory after this process
// has gone on (the local backend: a detached process of its own binary).
// RemoveLater takes trash, an open directory, and removes its entry name
// below it without following links; lock is that entry's flock, which the
// remover holds until it is done. It returns once the removal is under way.
type trashRemover interface {
	RemoveLater(trash *os.File, name string, lock *os.File) error
}

// trashName prefixes the entries of the trash dir (sweepTrash removes only
// these).
const trashName = "work."

// trashDir is beside the state root (<root>.trash: on the same file
// system, for the rename, and outside the root, whose entries are
// sessions).
func (m *Manager) trashDir() string { return filepath.Clean(m.root) + ".trash" }

// memoryTrash is the trash dir of the workspaces in memory below root (the
// backend's MemoryWorkRoot, made this user's alone): no session's
// directory has its name.
func memoryTrash(root string) string { return filepath.Join(root, "trash") }

// LastCommand says that the session is released right after its next
// command (sbx exec without --keep): that command's round trip is made the
// final pull-back's full scan, so the release need not run another.
func (s *Session) LastCommand() {
	s.run.Lock()
	s.fold.asked = true
	s.run.Unlock()
}

// foldState is the command round that stands for the final pull; run.
type foldState struct {
	asked bool
	round uint64 // the Host round number of the full-scan round; 0: none
	done  bool   // that round came back whole
	rep   sbxsync.Report
}

// foldBegin, before a sandbox command's round trip, makes it the full-scan
// one when the session ends after it. Called with run held, without mu.
func (s *Session) foldBegin() {
	if !s.fold.asked || s.fold.round != 0 {
		return
	}
	s.mu.Lock()
	jobs := len(s.jobs)
	s.mu.Unlock()
	if jobs > 0 {
		return // a job's writes after this round need the final pull
	}
	s.sync.FullScanNext()
	s.sync.EndsAfterNext()
	s.fold.round = s.sync.Rounds() + 1
}

// foldEnd records whether the full-scan round came back whole.
func (s *Session) foldEnd(rep sbxsync.Report, err error) {
	if s.fold.round == 0 || s.fold.done {
		return
	}
	if err != nil || s.sync.Rounds() != s.fold.round {
		s.fold.round = 0 // the final pull runs
		return
	}
	s.fold.done, s.fold.rep = true, rep
}

// folded says that the last round trip was the command's full-scan one
// and came back whole: Release's last pull-back would find nothing more.
// Called with run held.
func (s *Session) folded() bool {
	if !s.fold.done || s.sync.Rounds() != s.fold.round {
		return false
	}
	s.mu.Lock()
	jobs := len(s.jobs)
	s.mu.Unlock()
	if jobs > 0 {
		return false
	}
	s.lastRelease = s.fold.rep
	var kept []string
	for _, r := range s.fold.rep.Refused {
		kept = append(kept, r.Path)
	}
	if len(kept) > 0 {
		s.noteLocking(fmt.Sprintf("session %s: changes the rules keep in the sandbox are lost with it: %s", s.name, listCut(kept, 20)))
	}
	s.m.log.Debug("last pull-back folded into the command's round trip", "session", s.name)
	return true
}

// removeState removes a session's state dir, its work dir (the
// workspaces) set aside first and removed after the caller goes on where
// the backend can. Called with the session's lock file held.
func (m *Manager) removeState(dir string) error {
	// Workspaces in memory are set aside on their own tmpfs.
	if p, ok := workroot.Of(dir); ok {
		m.removeAside(memoryTrash(filepath.Dir(p)), p)
	}
	if err := removeMemoryWork(dir); err != nil {
		return fmt.Errorf("remove the session's workspaces in memory: %w (remove them by hand once no sbx uses them)", err)
	}
	m.removeAside(m.trashDir(), diskWorkRoot(dir))
	// cache = "session" keeps the caches here, read-only directories and all.
	if err := cache.Remove(filepath.Join(dir, "cache")); err != nil {
		return fmt.Errorf("remove session state %s: %w (remove it by hand once no sbx uses it)", dir, err)
	}
	// Again when an entry appeared meanwhile (ENOTEMPTY): a process of the
	// session that was starting (its host daemon's socket) and that ends
	// when it finds the directory gone.
	var err error
	for range 3 {
		if err = os.RemoveAll(dir); !errors.Is(err, syscall.ENOTEMPTY) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("remove session state %s: %w (remove it by hand once no sbx uses it)", dir, err)
	}
	return nil
}

// removeAside removes the directory dir, when there is one, by setting it
// aside into trash and removing it there (removeTrash); in line when it
// cannot be set aside.
func (m *Manager) removeAside(trash, dir string) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return
	}
	if name, err := setAside(trash, dir); err == nil {
		m.removeTrash(trash, name)
	} else {
		m.log.Debug("workspace removed in line", "dir", dir, "why", err)
	}
}

// setAside renames dir into the trash dir and returns its entry's name.
func setAside(trash, dir string) (string, error) {
	if err := os.Mkdir(trash, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	// Only a directory of this user's (not a link planted there) takes
	// the workspace.
	fi, err := os.Lstat(trash)
	if err != nil {
		return "", err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is not a directory of this user's that only it can write", trash)
	}
	var b [8]byte
	rand.Read(b[:])
	name := trashName + hex.EncodeToString(b[:])
	if err := os.Rename(dir, filepath.Join(trash, name)); err != nil {
		return "", err
	}
	return name, nil
}

// removeTrash removes the entry name of the trash dir: through the
// backend's remover, after this call, when it has one and the entry is not
// already being removed; else now.
func (m *Manager) removeTrash(trashDir, name string) {
	p := filepath.Join(trashDir, name)
	lk, err := os.Open(p)
	if err != nil {
		return // gone, or never there
	}
	defer lk.Close()
	switch locked, err := tryLock(lk); {
	case err != nil:
		m.log.Debug("trash entry not locked", "entry", p, "err", err)
		return
	case !locked:
		return // its remover runs
	}
	if tr, ok := m.prov.(trashRemover); ok {
		trash, err := os.Open(trashDir)
		if err == nil {
			err = tr.RemoveLater(trash, name, lk)
			trash.Close()
			if err == nil {
				return
			}
		}
		m.log.Debug("trash removed in line", "entry", p, "why", err)
	}
	if err := cache.Remove(p); err != nil {
		m.log.Warn("remove a released session's workspace", "dir", p, "err", err)
	}
}

// sweepTrash removes what a killed remover left in the trash dir (the
// state root's, or that of the workspaces in memory). Cheap when there is
// nothing: one failed open, or one short directory read.
func (m *Manager) sweepTrash(trash string) {
	d, err := os.Open(trash)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(maxSwept)
	d.Close()
	for _, n := range names {
		if strings.HasPrefix(n, trashName) {
			m.removeTrash(trash, n)
		}
	}
}

// maxSwept bounds the trash entries one start looks at (the rest wait for
// the next).
const maxSwept = 64

// tryLock takes f's flock without waiting; false: someone holds it.
func tryLock(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
