//go:build linux

package local

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/mountinfo"
)

// Landlock is the second layer under the mount table: where the kernel has
// it, a command may write (create, remove, rename, link, truncate, open for
// writing) only under the workspace and caches sbx bound in read-write and
// the sandbox's own tmpfs mounts (/tmp, the home, /run, /dev/shm), the
// terminals in /dev/pts and the few device files in /dev. Reads and
// execution stay as the mounts allow. So a write the mounts would let
// through by mistake, /proc's writable files among them (/proc/sys and
// /proc/sysrq-trigger without the read-only remount, /proc/self/*), a new
// file in /dev, or a remount some future kernel bug allows, is still
// refused with EACCES.
//
// Best effort by ABI: the rights a kernel does not know (REFER before ABI 2,
// TRUNCATE before ABI 3) are left out; scoping abstract unix sockets (ABI 6)
// keeps a command from connecting to the host's abstract sockets when the
// network namespace is shared (--net). No Landlock at all (an older kernel,
// or not in the "lsm=" list) leaves the mounts as the only layer and `sbx
// doctor` says so.
//
// It is applied with landlock_restrict_self on the worker's locked main
// thread, the thread every command is forked from (the kernel's ABI 7 has no
// flag to apply it to all threads; the worker's other threads run only sbx's
// own code).
//
// sbx calls the three syscalls itself instead of using
// github.com/landlock-lsm/go-landlock: that package restricts all threads
// through libcap's psx, which links C when cgo is on, and one thread is what
// is needed here.

// Write rights by the ABI that introduced them.
const (
	llWriteABI1 = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llRefer    = unix.LANDLOCK_ACCESS_FS_REFER    // ABI 2
	llTruncate = unix.LANDLOCK_ACCESS_FS_TRUNCATE // ABI 3
	// The rights that make sense on a file rather than a directory.
	llFileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | llTruncate
)

// writableFixed are the sandbox's own mounts and device files that stay
// writable, beside the read-write binds found in the mount table.
var writableFixed = []string{
	"/tmp", sandboxHome, "/run", "/dev/shm", "/dev/pts",
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
}

// landlockABI is the kernel's Landlock ABI version, or 0 with the reason
// when there is none.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch errno {
	case 0:
		return int(v), nil
	case unix.ENOSYS:
		return 0, errors.New("the kernel has no Landlock (before 5.13, or built without CONFIG_SECURITY_LANDLOCK)")
	case unix.EOPNOTSUPP:
		//lint:ignore ST1005 Landlock is a proper noun
		return 0, errors.New("Landlock is built in but not enabled (add landlock to the kernel's lsm= boot parameter)")
	default:
		return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
}

// llRulesetAttr is struct landlock_ruleset_attr up to ABI 6; the size
// passed tells the kernel which fields are there.
type llRulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// applyLandlock restricts writes of this thread, and of every process it
// starts from now on, to the writable mounts. Without Landlock it does
// nothing and says why in the returned note.
func applyLandlock() (note string, err error) {
	if !kernelLayers {
		return "disabled in this build", nil
	}
	abi, err := landlockABI()
	if abi == 0 {
		return err.Error(), nil
	}
	handled := uint64(llWriteABI1)
	if abi >= 2 {
		handled |= llRefer
	}
	if abi >= 3 {
		handled |= llTruncate
	}
	attr := llRulesetAttr{handledFS: handled}
	size := unsafe.Sizeof(attr.handledFS)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.handledNet)
	}
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size += unsafe.Sizeof(attr.scoped)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return "", fmt.Errorf("create the Landlock ruleset (ABI %d): %w", abi, errno)
	}
	defer unix.Close(int(fd))
	paths, err := writablePaths()
	if err != nil {
		return "", err
	}
	for _, p := range paths {
		if err := llAllow(int(fd), p, handled); err != nil {
			return "", err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return "", fmt.Errorf("apply the Landlock ruleset: %w (no_new_privs must be set first)", errno)
	}
	return fmt.Sprintf("ABI %d, writes limited to %d paths", abi, len(paths)), nil
}

// llAllow lets every handled right through beneath path p (only the file
// rights when p is a file). A path missing from this sandbox is skipped.
func llAllow(rulesetFD int, p string, handled uint64) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("open %s for a Landlock rule: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s for a Landlock rule: %w", p, err)
	}
	allowed := handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		allowed &= llFileRights
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: allowed, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("add the Landlock rule for %s: %w", p, errno)
	}
	return nil
}

// writablePaths are writableFixed plus the read-write bind mounts in this
// process's mount table (the workspace and the package caches): every
// read-write mount but the root, /dev itself, /proc and /sys and what is
// beneath them. A line of the table it cannot read is left out: a missed
// mount is only a write refused.
func writablePaths() ([]string, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, fmt.Errorf("read the mount table for Landlock: %w", err)
	}
	paths := append([]string(nil), writableFixed...)
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	for _, m := range mounts {
		if !m.RW || seen[m.Point] || !writableMount(m.Point) {
			continue
		}
		seen[m.Point] = true
		paths = append(paths, m.Point)
	}
	return paths, nil
}

func writableMount(p string) bool {
	for _, no := range []string{"/", "/dev", "/proc", "/sys"} {
		if p == no || (no != "/" && strings.HasPrefix(p, no+"/")) {
			return false
		}
	}
	return strings.HasPrefix(p, "/")
}

// LandlockLayer says whether commands run under Landlock, at which ABI,
// or why not, for `sbx doctor`.
func LandlockLayer() (ok bool, detail string) {
	if !kernelLayers {
		return false, "disabled in this build (tag sbx_nokernellayers, for benchmarks only)"
	}
	abi, err := landlockABI()
	if abi == 0 {
		return false, "missing: " + err.Error() + "; writes are limited by the read-only mounts only"
	}
	return true, fmt.Sprintf("active: ABI %d; commands write only in the workspace, caches and the sandbox's tmpfs mounts", abi)
}
