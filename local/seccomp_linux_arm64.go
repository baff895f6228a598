//go:build linux

package local

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	archName  = "arm64"
	x32Bit    = 0 // no second ABI sharing the arch value
)

// archDeniedSyscalls: arm64 has none of x86-64's obsolete calls.
var archDeniedSyscalls []sysName
