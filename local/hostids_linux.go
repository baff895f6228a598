//go:build linux

package local

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The sandbox's uid and gid (1000 inside) map to one host uid and gid, never
// to host uid 0:
//
//   - As an ordinary user, sbx maps its own uid and gid: the only ones an
//     unprivileged process may map. Nothing changes for that user.
//   - As root, sbx maps each sandbox to a host uid and gid of its own, taken
//     from root's subordinate range in /etc/subuid and /etc/subgid when they
//     list one (as container runtimes do), else from a fixed range (see
//     defaultIDStart). A fresh id per live sandbox, not one shared id: the
//     kernel keeps per-uid state that namespaces do not separate (keyrings,
//     RLIMIT_NPROC, inotify and mqueue budgets, signal permission), so two
//     sandboxes of the same root never share it. A slot is held by an flock
//     on /run/sbx/ids/<n> that the init inherits and keeps until it exits;
//     the kernel drops the lock with the init, so a crashed sandbox frees its
//     id without any cleanup.
//
// The workspaces are chowned to that id so the sandbox can write them; the
// host side of the sync keeps running as the user who runs sbx, so files it
// writes into the code dirs are owned by that user.

const (
	// defaultIDStart and defaultIDCount are the host range used as root
	// when /etc/subuid or /etc/subgid has no entry for root: 65536 ids from
	// 1,000,000,000, far above the ids useradd hands out to users (below
	// 60000) and to subordinate ranges (100000 upwards in 65536-id blocks),
	// and below 2^31 (some tools treat ids as signed). When a listed range of
	// another user overlaps it, the fallback moves above the highest one.
	defaultIDStart = 1_000_000_000
	defaultIDCount = 65536
	// idLockDir holds one lock file per id slot in use (root only; /run is
	// cleared at boot, when no sandbox survives either).
	idLockDir = "/run/sbx/ids"
)

// hostIDs is what a sandbox's uid and gid 1000 are on the host.
type hostIDs struct {
	UID, GID int
	// Source says where the range came from, for `sbx doctor`.
	Source string
	// lock holds the slot while the init lives (root only).
	lock *os.File
}

// homeSlot is root's slot of choice: a hash of its path into the upper
// half of the range (the lowest slots are what sandboxes of other roots
// take when theirs is busy), or -1 for a range of one id.
func homeSlot(root string, count int) int {
	if count < 2 {
		return -1
	}
	low := min(count/2, 4096)
	h := fnv.New64a()
	h.Write([]byte(filepath.Clean(root)))
	return low + int(h.Sum64()%uint64(count-low))
}

// idRange is a run of host ids [Start, Start+Count).
type idRange struct{ Start, Count int }

// allocHostIDs picks the host ids for a new sandbox of the state root
// root: the root's home slot when it is free, else the lowest free one.
// The package caches are kept per host uid (cache/), so a new session on
// another slot than the last found them cold; and the lowest free slot is
// the one every other sandbox takes first, so a root's last slot was often
// taken by the time of its next session.
func allocHostIDs(root string) (hostIDs, error) {
	if os.Geteuid() != 0 {
		return hostIDs{UID: os.Geteuid(), GID: os.Getegid(), Source: "the user running sbx"}, nil
	}
	uids, usrc := rootRange("/etc/subuid")
	gids, gsrc := rootRange("/etc/subgid")
	count := min(uids.Count, gids.Count)
	if count <= 0 {
		return hostIDs{}, fmt.Errorf("the subordinate id ranges for root in /etc/subuid (%d ids) and /etc/subgid (%d ids) are empty: list at least one id for root in each", uids.Count, gids.Count)
	}
	if err := os.MkdirAll(idLockDir, 0o700); err != nil {
		return hostIDs{}, fmt.Errorf("create %s (it holds which host ids running sandboxes use): %w", idLockDir, err)
	}
	if err := checkRootOnly(idLockDir); err != nil {
		return hostIDs{}, err
	}
	// The root's home slot, then the lowest free one: the lock files are
	// then as many as the state roots used plus the most sandboxes ever
	// running at once, not one per id of the range.
	prefer := homeSlot(root, count)
	order := func(yield func(int) bool) {
		if prefer >= 0 && prefer < count && !yield(prefer) {
			return
		}
		for slot := 0; slot < count; slot++ {
			if slot != prefer && !yield(slot) {
				return
			}
		}
	}
	for slot := range order {
		f, err := os.OpenFile(filepath.Join(idLockDir, strconv.Itoa(slot)), os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return hostIDs{}, fmt.Errorf("open id slot %d in %s: %w", slot, idLockDir, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return hostIDs{}, fmt.Errorf("lock id slot %d in %s: %w", slot, idLockDir, err)
		}
		return hostIDs{
			UID: uids.Start + slot, GID: gids.Start + slot, lock: f,
			Source: fmt.Sprintf("slot %d of %s (uids %d-%d, gids %d-%d)", slot, joinSources(usrc, gsrc),
				uids.Start, uids.Start+count-1, gids.Start, gids.Start+count-1),
		}, nil
	}
	return hostIDs{}, fmt.Errorf("all %d host ids of the range (%s) are in use by running sandboxes: release some (sbx release --all) or list a larger range for root in /etc/subuid and /etc/subgid", count, joinSources(usrc, gsrc))
}

func joinSources(a, b string) string {
	if a == b {
		return a
	}
	return a + " and " + b
}

// checkRootOnly refuses a lock directory another user could tamper with.
func checkRootOnly(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s must be a directory owned by root and writable only by root (it is %v, owner %d): remove it and retry", dir, fi.Mode(), st.Uid)
	}
	return nil
}

// rootRange returns root's subordinate range from file (/etc/subuid or
// /etc/subgid), or the default range when the file lists none for root.
func rootRange(file string) (idRange, string) {
	listed, err := readSubIDs(file)
	if err == nil {
		for _, e := range listed {
			if e.owner == "root" || e.owner == "0" {
				return e.r, file
			}
		}
	}
	r := idRange{Start: defaultIDStart, Count: defaultIDCount}
	for moved := true; moved; {
		moved = false
		for _, e := range listed {
			if e.r.Start < r.Start+r.Count && r.Start < e.r.Start+e.r.Count {
				r.Start = e.r.Start + e.r.Count
				moved = true
			}
		}
	}
	return r, "sbx's default range"
}

type subIDEntry struct {
	owner string
	r     idRange
}

// readSubIDs parses /etc/subuid-style lines: owner:start:count. Malformed
// lines are skipped, as shadow-utils does.
func readSubIDs(file string) ([]subIDEntry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []subIDEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 {
			continue
		}
		start, err1 := strconv.ParseUint(parts[1], 10, 31)
		count, err2 := strconv.ParseUint(parts[2], 10, 31)
		if err1 != nil || err2 != nil || start == 0 || count == 0 || start+count > 1<<31 {
			continue
		}
		out = append(out, subIDEntry{owner: parts[0], r: idRange{Start: int(start), Count: int(count)}})
	}
	return out, sc.Err()
}

// chownTree gives the tree at root (a workspace or a sync-path copy in the
// state dir) to the sandbox's host ids, without following symlinks.
func chownTree(root string, ids hostIDs) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, ids.UID, ids.GID); err != nil {
			return fmt.Errorf("give %s to the sandbox's host uid %d: %w", p, ids.UID, err)
		}
		return nil
	})
}
