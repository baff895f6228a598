package sync

import (
	"path/filepath"
	"strings"
	gosync "sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/mountinfo"
)

// fineTimestamps reports whether root is on a local file system known to
// store nanosecond timestamps stamped by this kernel's clock (ext4, tmpfs,
// XFS, Btrfs), with nothing mounted below it (the scans cross mount
// points). Any other (a network or FUSE file system, whose times come from
// another clock; overlayfs; FAT's two seconds), a mount inside root, or a
// check that fails keeps racyWindow.
//
// Its answer is kept for mountInfoTTL, as the mount table is, while root
// is still the same directory (device and inode; a file system mounted
// over root, or a symlink on the way to it changed, is another): each
// scan then costs one stat here, not a statfs, a walk of root's symlinks
// and a look at the mount table.
func fineTimestamps(root string) bool {
	var st unix.Stat_t
	if unix.Stat(root, &st) != nil {
		return false
	}
	fineCache.Lock()
	e, ok := fineCache.m[root]
	fineCache.Unlock()
	if ok && e.dev == st.Dev && e.ino == st.Ino && time.Since(e.at) < mountInfoTTL {
		return e.fine
	}
	fine := checkFineTimestamps(root)
	fineCache.Lock()
	if fineCache.m == nil || len(fineCache.m) >= 64 {
		fineCache.m = map[string]fineEntry{} // a few code dirs; bounded anyway
	}
	fineCache.m[root] = fineEntry{at: time.Now(), dev: st.Dev, ino: st.Ino, fine: fine}
	fineCache.Unlock()
	return fine
}

// fineCache holds fineTimestamps' answers by root.
var fineCache struct {
	gosync.Mutex
	m map[string]fineEntry
}

type fineEntry struct {
	at       time.Time
	dev, ino uint64
	fine     bool
}

// checkFineTimestamps is fineTimestamps' check itself.
func checkFineTimestamps(root string) bool {
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC:
	default:
		return false
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	mps, ok := mountPoints()
	if !ok {
		return false
	}
	below := strings.TrimSuffix(real, "/") + "/"
	for _, mp := range mps {
		if strings.HasPrefix(mp, below) {
			return false
		}
	}
	return true
}

// mountInfoTTL bounds how long mountPoints reuses what it read: a file
// system mounted inside a code dir is taken into account within it.
const mountInfoTTL = time.Second

var mountCache struct {
	gosync.Mutex
	at  time.Time
	mps []string
	ok  bool
}

// mountPoints lists the mount points of this process's mount namespace;
// ok is false when the table cannot be read.
func mountPoints() ([]string, bool) {
	mountCache.Lock()
	defer mountCache.Unlock()
	if time.Since(mountCache.at) < mountInfoTTL {
		return mountCache.mps, mountCache.ok
	}
	mounts, err := mountinfo.Read()
	mountCache.at, mountCache.mps, mountCache.ok = time.Now(), nil, err == nil
	for _, m := range mounts {
		mountCache.mps = append(mountCache.mps, m.Point)
	}
	return mountCache.mps, mountCache.ok
}
