package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	sbxsync "github.com/sbx-sh/sbx/sync"
)

// A session's journal (see sync.Journal) lives beside the sessions' state,
// under <state>/sbx/journal/<session>, not in the session's own state
// directory: it outlives the session (sync.JournalKeep), so that `sbx undo`
// still works after the session was released.

// JournalRoot is the directory holding every session's journal.
func (m *Manager) JournalRoot() string { return filepath.Join(filepath.Dir(m.root), "journal") }

// Journal returns the named session's journal, capped at size bytes (zero:
// sync.DefaultJournalSize).
func (m *Manager) Journal(name string, size int64) (*sbxsync.Journal, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	m.pruneOnce.Do(func() { sbxsync.PruneJournals(m.JournalRoot()) })
	return &sbxsync.Journal{Dir: filepath.Join(m.JournalRoot(), name), Max: size}, nil
}

// Undo restores, on the host, what the named session's last pull-back
// overwrote, deleted or created (paths empty), or the named host paths from
// their newest journal entries. It holds the session's lock, so no command
// of the session runs meanwhile.
func (m *Manager) Undo(ctx context.Context, name string, paths []string, size int64) (sbxsync.UndoResult, error) {
	j, err := m.Journal(name, size)
	if err != nil {
		return sbxsync.UndoResult{}, err
	}
	if _, err := os.Stat(j.Dir); err != nil {
		return sbxsync.UndoResult{}, fmt.Errorf("session %s has no journal (nothing of the host was changed by it in the last %s, or it never ran): %w", name, sbxsync.JournalKeep, err)
	}
	dir := filepath.Join(m.root, name)
	if _, err := os.Stat(dir); err == nil {
		l, err := lock(dir)
		if err != nil {
			return sbxsync.UndoResult{}, fmt.Errorf("lock session %s: %w", name, err)
		}
		defer l.unlock()
	}
	return j.Undo(paths)
}

// HeldDeletions lists the deletions of the named session that wait for
// AcceptDeletions.
func (m *Manager) HeldDeletions(name string) ([]sbxsync.HeldDeletion, error) {
	j, err := m.Journal(name, 0)
	if err != nil {
		return nil, err
	}
	return sbxsync.Held(j.Dir)
}

// AcceptDeletions applies (or, with reject, drops) the named session's held
// deletions, under its lock.
func (m *Manager) AcceptDeletions(ctx context.Context, name string, reject bool, size int64) (sbxsync.AcceptResult, int, error) {
	if err := CheckName(name); err != nil {
		return sbxsync.AcceptResult{}, 0, err
	}
	j, err := m.Journal(name, size)
	if err != nil {
		return sbxsync.AcceptResult{}, 0, err
	}
	// The session's lock, while it exists: no command of it runs meanwhile.
	dir := filepath.Join(m.root, name)
	if _, err := os.Stat(dir); err == nil {
		l, err := lock(dir)
		if err != nil {
			return sbxsync.AcceptResult{}, 0, fmt.Errorf("lock session %s: %w", name, err)
		}
		defer l.unlock()
	}
	if reject {
		n, err := sbxsync.RejectDeletions(j.Dir)
		return sbxsync.AcceptResult{}, n, err
	}
	res, err := sbxsync.AcceptDeletions(j.Dir, j)
	return res, 0, err
}
