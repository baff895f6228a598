//go:build linux && !amd64 && !arm64

package local

// No filter is built for this architecture: the worker refuses to start
// rather than run commands without one (see installSeccomp).
const (
	auditArch = 0
	archName  = "unsupported"
	x32Bit    = 0
)

var archDeniedSyscalls []sysName
