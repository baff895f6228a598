//go:build linux

package local

import (
	"fmt"
	"runtime"
	"sort"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The syscall filter is the local backend's answer to a shared kernel: what a
// command can ask the kernel for directly, beyond the file system and the
// namespaces, is cut down to what Docker's default profile allows a container
// without capabilities.
//
// It is a deny-list, derived by hand from github.com/moby/profiles/seccomp
// v0.3.0 (default.json): every syscall that profile does not allow a
// process without capabilities, on x86-64 and arm64, is denied here, with the
// profile's argument rules (clone flags, socket families, personality). The
// exceptions, each on purpose: unshare and clone are refused only with
// namespace flags (Docker refuses unshare outright; unshare(CLONE_FS) gives
// nothing); name_to_handle_at stays allowed as in Docker (only
// open_by_handle_at reaches outside a mount); ptrace and process_vm_* stay
// allowed as in Docker on kernels >= 4.8 (a command sees only its own
// worker's pid namespace). Added beyond Docker, as bubblewrap does: the
// TIOCSTI and TIOCLINUX ioctls, which would let a command type into a
// terminal the host handed it.
//
// A deny-list and not Docker's allowlist because an allowlist must know
// every syscall a newer libc may try first (faccessat2, clone3, rseq, ...):
// EPERM where libc expects ENOSYS breaks its fallback. The limit that buys:
// a syscall added to the kernel after this table is allowed until it is
// listed.
//
// Denied calls fail with EPERM (clone3 with ENOSYS, so that libc and Go fall
// back to clone, whose flags the filter can see); nothing is killed. A call
// from another ABI (i386 or x32 on x86-64, arm32 on arm64) is denied whole:
// its syscall numbers mean other calls.
//
// The worker installs it with TSYNC on all its threads once its own mounts
// and namespaces are made, just before it serves commands; every command and
// all it starts inherit it, and no process can remove it.

// deniedSyscalls are refused outright on every architecture sbx filters.
var deniedSyscalls = []sysName{
	// Kernel keyrings: the host user's keyring is reachable by uid.
	{"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
	// Kernel programs, tracing and profiling.
	{"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN}, {"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
	{"fanotify_init", unix.SYS_FANOTIFY_INIT},
	// Replacing or extending the kernel.
	{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE}, {"delete_module", unix.SYS_DELETE_MODULE},
	// Mounts and namespaces: the sandbox's file system is made by sbx.
	{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2}, {"pivot_root", unix.SYS_PIVOT_ROOT}, {"chroot", unix.SYS_CHROOT},
	{"fsopen", unix.SYS_FSOPEN}, {"fsconfig", unix.SYS_FSCONFIG}, {"fsmount", unix.SYS_FSMOUNT}, {"fspick", unix.SYS_FSPICK},
	{"move_mount", unix.SYS_MOVE_MOUNT}, {"open_tree", unix.SYS_OPEN_TREE}, {"open_tree_attr", unix.SYS_OPEN_TREE_ATTR},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR}, {"setns", unix.SYS_SETNS},
	// File handles reach files outside the mounts (the "shocker" escape).
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
	// Page-fault handling, a favourite of kernel exploits.
	{"userfaultfd", unix.SYS_USERFAULTFD},
	// io_uring: a second syscall interface the filter cannot see into.
	{"io_uring_setup", unix.SYS_IO_URING_SETUP}, {"io_uring_enter", unix.SYS_IO_URING_ENTER},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER},
	// Host-global state: clocks, swap, reboot, kernel log, accounting, quotas, names.
	{"settimeofday", unix.SYS_SETTIMEOFDAY}, {"clock_settime", unix.SYS_CLOCK_SETTIME},
	{"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF}, {"reboot", unix.SYS_REBOOT},
	{"syslog", unix.SYS_SYSLOG}, {"acct", unix.SYS_ACCT}, {"quotactl", unix.SYS_QUOTACTL}, {"quotactl_fd", unix.SYS_QUOTACTL_FD},
	{"sethostname", unix.SYS_SETHOSTNAME}, {"setdomainname", unix.SYS_SETDOMAINNAME}, {"vhangup", unix.SYS_VHANGUP},
	{"nfsservctl", unix.SYS_NFSSERVCTL},
	// Other processes' memory and files, NUMA placement (CAP_SYS_PTRACE and
	// CAP_SYS_NICE in Docker's profile).
	{"kcmp", unix.SYS_KCMP}, {"pidfd_getfd", unix.SYS_PIDFD_GETFD}, {"process_madvise", unix.SYS_PROCESS_MADVISE},
	{"get_mempolicy", unix.SYS_GET_MEMPOLICY}, {"set_mempolicy", unix.SYS_SET_MEMPOLICY}, {"mbind", unix.SYS_MBIND},
	{"migrate_pages", unix.SYS_MIGRATE_PAGES}, {"move_pages", unix.SYS_MOVE_PAGES},
	{"set_mempolicy_home_node", unix.SYS_SET_MEMPOLICY_HOME_NODE},
	// LSM attributes.
	{"lsm_get_self_attr", unix.SYS_LSM_GET_SELF_ATTR}, {"lsm_set_self_attr", unix.SYS_LSM_SET_SELF_ATTR},
	{"lsm_list_modules", unix.SYS_LSM_LIST_MODULES},
}

type sysName struct {
	name string
	nr   uint32
}

// nsFlags are the clone and unshare flags that make a new namespace
// (CLONE_NEWTIME only means that for unshare and clone3).
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// socketFamilies are the address families Docker's profile lets socket(2)
// create; the rest (AF_VSOCK to a hypervisor's host, AF_ALG, old protocol
// stacks) are refused.
var socketFamilies = []uint32{
	unix.AF_UNSPEC, unix.AF_UNIX, unix.AF_INET, 7, 8, 9, unix.AF_INET6, 13, 14, 15, 16, unix.AF_NETLINK, unix.AF_PACKET,
	21, 22, 24, 26, 27, 28, 29, 30, 31, 32, 33, 35, 36, 39, 41, 42, 43, 44, 45,
}

// personalities are the personality(2) values Docker's profile allows:
// Linux, PER_LINUX32, UNAME26 and both, and the query. The rest (among them
// READ_IMPLIES_EXEC and ADDR_NO_RANDOMIZE) weaken the command's own
// defences.
var personalities = []uint32{0, 0x8, 0x20000, 0x20008, 0xffffffff}

// terminalIoctls type into or drive a terminal: with a host terminal as
// stdio they would reach the host's shell.
var terminalIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)

	// Offsets in struct seccomp_data (little-endian on both arches).
	offNr   = 0
	offArch = 4
	offArg0 = 16 // args[i] at 16+8*i; the low 32 bits come first
)

// seccompProgram is the filter for this architecture, and how many syscall
// rules it has (for `sbx doctor`).
func seccompProgram() ([]bpf.Instruction, int) {
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: retEPERM}, // another ABI: its numbers mean other calls
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if x32Bit != 0 {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32Bit, SkipTrue: 0, SkipFalse: 1},
			bpf.RetConstant{Val: retEPERM})
	}
	// Each rule is a syscall number and what to run when it matches (a
	// return, or an argument check that returns). They are searched as a
	// balanced tree on the number, so an allowed call, the common case,
	// costs about log2(rules) compares rather than one per rule.
	var rules []seccompRule
	for _, s := range append(append([]sysName(nil), deniedSyscalls...), archDeniedSyscalls...) {
		rules = append(rules, seccompRule{s.nr, []bpf.Instruction{bpf.RetConstant{Val: retEPERM}}})
	}
	rules = append(rules, seccompRule{unix.SYS_CLONE3, []bpf.Instruction{bpf.RetConstant{Val: retNoSys}}})
	// Argument rules load the argument, decide and return. Only the low 32
	// bits are checked: the kernel reads these arguments as int or unsigned
	// int (clone's and unshare's namespace flags all sit in the low half).
	flagsRule := func(arg uint32) []bpf.Instruction {
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: offArg0 + 8*arg, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipFalse: 1},
			bpf.RetConstant{Val: retEPERM},
			bpf.RetConstant{Val: retAllow},
		}
	}
	oneOf := func(arg uint32, vals []uint32, match, other uint32) []bpf.Instruction {
		b := []bpf.Instruction{bpf.LoadAbsolute{Off: offArg0 + 8*arg, Size: 4}}
		for i, v := range vals {
			// Jump to the "match" return, which follows the last compare
			// and the "other" return.
			b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(vals) - i)})
		}
		return append(b, bpf.RetConstant{Val: other}, bpf.RetConstant{Val: match})
	}
	rules = append(rules,
		seccompRule{unix.SYS_CLONE, flagsRule(0)},
		seccompRule{unix.SYS_UNSHARE, flagsRule(0)},
		seccompRule{unix.SYS_SOCKET, oneOf(0, socketFamilies, retAllow, retEPERM)},
		seccompRule{unix.SYS_PERSONALITY, oneOf(0, personalities, retAllow, retEPERM)},
		seccompRule{unix.SYS_IOCTL, oneOf(1, terminalIoctls, retEPERM, retAllow)},
	)
	sort.Slice(rules, func(i, j int) bool { return rules[i].nr < rules[j].nr })
	return append(p, ruleTree(rules)...), len(rules)
}

type seccompRule struct {
	nr    uint32
	block []bpf.Instruction // runs when the number matches; always returns
}

// ruleTree decides among rules (sorted by number, the number in the
// accumulator): a split on the middle number, down to short linear runs,
// each ending in "allow". Jumps stay within BPF's 255-instruction reach for
// tables of this size; bpf.Assemble would not catch a wrapped offset, so the
// unit test checks every verdict.
func ruleTree(rules []seccompRule) []bpf.Instruction {
	if len(rules) <= 3 {
		var p []bpf.Instruction
		for _, r := range rules {
			p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(r.block))})
			p = append(p, r.block...)
		}
		return append(p, bpf.RetConstant{Val: retAllow})
	}
	mid := len(rules) / 2
	left, right := ruleTree(rules[:mid]), ruleTree(rules[mid:])
	if len(left) > 255 {
		panic("seccomp rule tree: jump out of BPF's reach")
	}
	p := []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: rules[mid].nr, SkipTrue: uint8(len(left))}}
	p = append(p, left...)
	return append(p, right...)
}

// installSeccomp loads the filter on every thread of this process. The
// calling thread must have no_new_privs set; TSYNC sets it on the others.
func installSeccomp() error {
	if !kernelLayers {
		return nil
	}
	if auditArch == 0 {
		return fmt.Errorf("install the syscall filter: no filter for %s", runtime.GOARCH)
	}
	prog, _ := seccompProgram()
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("assemble the syscall filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("install the syscall filter: seccomp: %w (the kernel needs CONFIG_SECCOMP_FILTER)", errno)
	}
	if r != 0 {
		return fmt.Errorf("install the syscall filter: thread %d could not take it", r)
	}
	return nil
}

// SeccompLayer says whether commands run under the syscall filter, and its
// size, for `sbx doctor`. It reads this process's own state: the filter
// sbx installs needs CONFIG_SECCOMP_FILTER, which the kernel reports in
// /proc/self/status.
func SeccompLayer() (ok bool, detail string) {
	if !kernelLayers {
		return false, "disabled in this build (tag sbx_nokernellayers, for benchmarks only)"
	}
	if auditArch == 0 {
		return false, "missing: no filter for " + runtime.GOARCH
	}
	if _, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_SECCOMP, 0, 0); errno == unix.EINVAL {
		return false, "missing: the kernel has no seccomp (CONFIG_SECCOMP)"
	}
	prog, rules := seccompProgram()
	return true, fmt.Sprintf("active: %d syscall rules for %s (%d BPF instructions), other ABIs denied; modelled on Docker's default profile",
		rules, archName, len(prog))
}

// applyKernelLayers puts the worker, and so every command it starts, under
// Landlock (where the kernel has it) and the syscall filter. It runs on the
// worker's locked main thread after its own mounts, with no_new_privs set.
func applyKernelLayers() error {
	if _, err := applyLandlock(); err != nil {
		return err
	}
	return installSeccomp()
}
