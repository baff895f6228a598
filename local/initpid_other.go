//go:build !linux

package local

// InitPid returns the host pid of a local sandbox's init; on this system
// there is none.
func InitPid(stateDir string) (int, error) { return 0, ErrUnsupported }
