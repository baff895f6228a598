//go:build linux

package local

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// limitFileSize bounds every file the sandbox's processes write to the disk
// limit (RLIMIT_FSIZE, inherited by the init's workers and their commands):
// the kernel stops one file at it, during the command, where the engine's
// check of the workspace comes after. A command writing past it gets
// SIGXFSZ (a Go program, EFBIG). Zero means no limit.
func limitFileSize(disk int64) error {
	if disk <= 0 {
		return nil
	}
	lim := uint64(disk)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
		return fmt.Errorf("limit file size to the disk limit (%d bytes): %w", disk, err)
	}
	return nil
}
