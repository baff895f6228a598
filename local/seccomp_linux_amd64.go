//go:build linux

package local

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	archName  = "x86-64"
	// x32Bit marks an x32 syscall number: same arch in seccomp_data, other
	// meanings, so it is denied whole.
	x32Bit = 0x40000000
)

// archDeniedSyscalls are the x86-64-only calls Docker's profile refuses
// (port I/O, obsolete and unimplemented calls).
var archDeniedSyscalls = []sysName{
	{"iopl", unix.SYS_IOPL}, {"ioperm", unix.SYS_IOPERM},
	{"_sysctl", unix.SYS__SYSCTL}, {"sysfs", unix.SYS_SYSFS}, {"ustat", unix.SYS_USTAT}, {"uselib", unix.SYS_USELIB},
	{"create_module", unix.SYS_CREATE_MODULE}, {"get_kernel_syms", unix.SYS_GET_KERNEL_SYMS},
	{"query_module", unix.SYS_QUERY_MODULE},
	{"afs_syscall", unix.SYS_AFS_SYSCALL}, {"getpmsg", unix.SYS_GETPMSG}, {"putpmsg", unix.SYS_PUTPMSG},
	{"security", unix.SYS_SECURITY}, {"tuxcall", unix.SYS_TUXCALL}, {"vserver", unix.SYS_VSERVER},
}
