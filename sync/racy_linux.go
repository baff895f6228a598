package sync

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	"golang.org/x/sys/unix"
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
	for _, mp := range mps {
		if strings.HasPrefix(mp, strings.TrimSuffix(real, "/")+"/") {
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

// mountPoints lists the mount points of this process's mount namespace
// (/proc/self/mountinfo's fifth field, its octal escapes undone); ok is
// false when it cannot be read.
func mountPoints() ([]string, bool) {
	mountCache.Lock()
	defer mountCache.Unlock()
	if time.Since(mountCache.at) < mountInfoTTL {
		return mountCache.mps, mountCache.ok
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	mountCache.at, mountCache.mps, mountCache.ok = time.Now(), nil, err == nil
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mountCache.mps = append(mountCache.mps, unescapeMount(f[4]))
	}
	return mountCache.mps, mountCache.ok
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
