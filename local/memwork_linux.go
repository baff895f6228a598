//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/sandbox"
)

// Workspaces in memory.
//
// A new session's first push creates every file of the code dirs in the
// sandbox's workspace. On a disk file system each create waits on its
// journal (about 200 µs a file on an ext4 that other writers keep busy,
// against about 12 µs on a tmpfs), and the workspace's removal at the
// release costs as much again. The session keeps a small tree's workspaces
// on a tmpfs the user already has instead (session/workspace.go decides
// which trees), in a directory of its own that only the user can enter.
//
// A tmpfs is memory, so what the sandbox writes there must be bounded by
// more than the disk limit's check after each command: the sandbox's memory
// cgroup is charged for the tmpfs pages its processes write, and a sandbox
// whose memory cannot be bounded by a cgroup (an ordinary user without a
// delegated cgroup v2 subtree) keeps its workspaces on disk.

// memoryRootEnv names the tmpfs that holds the user's own runtime files.
const memoryRootEnv = "XDG_RUNTIME_DIR"

// sharedMemory is the tmpfs every Linux system has, writable by all (with
// the sticky bit): sbx's directory there is checked to be this user's.
const sharedMemory = "/dev/shm"

// MemoryWorkRoot returns this user's directory on a tmpfs for workspaces
// kept in memory, made when missing: sbx-<uid> in $XDG_RUNTIME_DIR when
// that is a tmpfs, else in /dev/shm. It fails, saying why, when workspaces
// of a sandbox with limits l may not be kept in memory: no memory limit, no
// memory cgroup this process may make, no tmpfs with need bytes free, or a
// directory there that is not this user's alone (planted by another user of
// /dev/shm).
func (p *Provider) MemoryWorkRoot(l sandbox.Limits, need int64) (string, error) {
	if l.MemoryBytes <= 0 {
		return "", errors.New("the sandbox has no memory limit to bound a workspace in memory")
	}
	cg, err := newCgroups("probe", sandbox.Limits{MemoryBytes: l.MemoryBytes})
	if err != nil {
		return "", fmt.Errorf("no memory cgroup to bound a workspace in memory: %w", err)
	}
	cg.remove()
	base := os.Getenv(memoryRootEnv)
	fs, ok := usableTmpfs(base)
	if base == "" || !filepath.IsAbs(base) || !ok {
		base = sharedMemory
		if fs, ok = usableTmpfs(base); !ok {
			return "", fmt.Errorf("%s is not a writable tmpfs that allows exec", base)
		}
	}
	if free := int64(fs.Bavail) * int64(fs.Bsize); free < need {
		return "", fmt.Errorf("%s has %d bytes free, under the %d the workspaces need", base, free, need)
	}
	dir := filepath.Join(base, "sbx-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := ownPrivateDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// usableTmpfs reports whether dir is on a tmpfs where the sandbox can work
// as in its state dir, and returns its statfs: writable, and not mounted
// noexec (a hardened /dev/shm often is: a bind from it would keep the flag,
// and ./run.sh in the workspace would fail with EACCES).
func usableTmpfs(dir string) (unix.Statfs_t, bool) {
	var st unix.Statfs_t
	ok := dir != "" && unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC && st.Flags&(unix.ST_NOEXEC|unix.ST_RDONLY) == 0
	return st, ok
}

// ownPrivateDir checks that dir is a directory (not a link to one) of this
// user's that no one else may enter.
func ownPrivateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s is not a directory of this user's that only it may enter (mode %o, owner %d): remove it, or set workspace = \"disk\"", dir, st.Mode, st.Uid)
	}
	return nil
}
