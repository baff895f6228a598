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
func fineTimestamps(root string) bool {
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
