//go:build unix

package session

import (
	"io/fs"
	"syscall"
)

// blocks is the disk a file takes, its inode, and whether other links share
// it.
func blocks(fi fs.FileInfo) (size int64, ino uint64, shared bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.Size(), 0, false
	}
	return int64(st.Blocks) * 512, uint64(st.Ino), st.Nlink > 1
}
