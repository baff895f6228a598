package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sbx-sh/sbx/cache"
	"github.com/sbx-sh/sbx/internal/workroot"
	"github.com/sbx-sh/sbx/sandbox"
)

// Where a sandbox's workspaces live.
//
// The workspaces (the sandbox's copies of the code dirs) are on the host
// for the local backend, bound into the sandbox. They are made empty at
// each claim and filled by the first push, file by file; on a disk file
// system each create waits on its journal, and a second session of a
// small repository spent most of its time there (docs/benchmarks.md, issue
// 14). A session with Params.MemoryWorkspace keeps a small tree's
// workspaces in memory instead: in a directory of its own on a tmpfs the
// backend names (local.Provider.MemoryWorkRoot), recorded in the state
// dir's workroot file so that any process of the session, and a release by
// name, finds them. A tree is small when the code dirs hold at most
// MemoryWorkspaceFiles entries and MemoryWorkspaceBytes bytes (and a
// quarter of the memory limit): what the first push puts in memory is
// bounded by that; what the sandbox writes there later by its memory
// cgroup, which the backend requires, and by the disk limit's check after
// each command. Anything else, and every failure to use memory, keeps the
// workspaces on disk in the state dir, as before.

// memoryWorkspaces is a provider that can keep workspaces in memory.
type memoryWorkspaces interface {
	// MemoryWorkRoot returns a directory of this user's on a tmpfs with
	// room for need more bytes, for sandboxes with limits l, or why not.
	MemoryWorkRoot(l sandbox.Limits, need int64) (string, error)
}

// The bounds of a tree whose workspaces may be kept in memory.
var (
	MemoryWorkspaceFiles       = 20000
	MemoryWorkspaceBytes int64 = 256 << 20
)

// diskWorkRoot is where the state dir dir keeps workspaces on disk.
func diskWorkRoot(dir string) string { return filepath.Join(dir, "work") }

// workRoot is the directory that holds the session's workspaces.
func (s *Session) workRoot() string {
	if s.work == "" {
		s.work = diskWorkRoot(s.dir)
		if p, ok := workroot.Of(s.dir); ok {
			s.work = p
		}
	}
	return s.work
}

// inMemory reports whether the session's workspaces are in memory.
func (s *Session) inMemory() bool { return s.workRoot() != diskWorkRoot(s.dir) }

// memoryWorkDir is the state dir dir's directory below the backend's root.
func memoryWorkDir(root, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(root, hex.EncodeToString(sum[:8]))
}

// removeWorkspaces removes the session's workspaces wherever they are (and
// the record of where), and forgets the choice. What the last sandbox made
// read-only goes too (cache.Remove): as an ordinary user os.RemoveAll
// cannot empty such a directory.
func (s *Session) removeWorkspaces() error {
	s.work = ""
	err := removeMemoryWork(s.dir)
	if rerr := cache.Remove(diskWorkRoot(s.dir)); err == nil {
		err = rerr
	}
	return err
}

// removeMemoryWork removes the workspaces in memory recorded for the state
// dir dir, then the record. In line: on a tmpfs that costs no disk.
func removeMemoryWork(dir string) error {
	p, ok := workroot.Of(dir)
	if ok {
		if err := cache.Remove(p); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, workroot.File)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// chooseWorkRoot decides where a new sandbox's workspaces go, makes that
// directory (and records it when in memory), and says why at debug level.
// Called by claim after removeWorkspaces.
func (s *Session) chooseWorkRoot() error {
	s.work = diskWorkRoot(s.dir)
	if !s.params.MemoryWorkspace {
		return nil
	}
	mw, ok := s.m.prov.(memoryWorkspaces)
	if !ok {
		return nil
	}
	maxBytes := MemoryWorkspaceBytes
	if l := s.params.Limits.MemoryBytes / 4; l > 0 && l < maxBytes {
		maxBytes = l
	}
	start := time.Now()
	files, bytes, small, err := smallTree(s.params.CodeDirs, MemoryWorkspaceFiles, maxBytes)
	counted := time.Since(start)
	if err != nil {
		s.m.log.Debug("workspaces on disk: the tree could not be counted", "session", s.name, "why", err)
		return nil
	}
	if !small {
		s.m.log.Debug("workspaces on disk: the tree is not small", "session", s.name, "entries_at_least", files, "bytes_at_least", bytes,
			"bound_entries", MemoryWorkspaceFiles, "bound_bytes", maxBytes)
		return nil
	}
	root, err := mw.MemoryWorkRoot(s.params.Limits, 2*bytes)
	if err != nil {
		s.m.log.Debug("workspaces on disk", "session", s.name, "why", err)
		return nil
	}
	s.m.sweepTrash(memoryTrash(root))
	p := memoryWorkDir(root, s.dir)
	if err := cache.Remove(p); err != nil {
		s.m.log.Debug("workspaces on disk: a stale directory in memory could not be removed", "session", s.name, "dir", p, "err", err)
		return nil
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		s.m.log.Debug("workspaces on disk", "session", s.name, "why", err)
		return nil
	}
	// Recorded before anything is put there: a crash leaves it findable.
	if err := writeFileRenamed(filepath.Join(s.dir, workroot.File), []byte(p+"\n")); err != nil {
		os.Remove(p)
		return err
	}
	s.work = p
	s.m.log.Debug("workspaces in memory", "session", s.name, "dir", p, "entries", files, "bytes", bytes, "counted", counted, "took", time.Since(start))
	return nil
}

// smallTree counts the entries below dirs, and the bytes they take (as
// diskUsage counts them: whole blocks, as a tmpfs holds them, or a file's
// full length when that is more), and reports whether both stay within
// the bounds; it stops at the first bound passed (the counts are then
// lower bounds), so that a large tree costs only its first maxFiles
// entries. A directory it cannot list or search is an error: not small.
func smallTree(dirs []string, maxFiles int, maxBytes int64) (int, int64, bool, error) {
	var n, bytes int64
	for _, d := range dirs {
		k, b, err := treeSize(d, int64(maxFiles)-n, maxBytes-bytes)
		n, bytes = n+k, bytes+b
		if err != nil {
			return int(n), bytes, false, err
		}
		if n > int64(maxFiles) || bytes > maxBytes {
			return int(n), bytes, false, nil
		}
	}
	return int(n), bytes, true, nil
}
