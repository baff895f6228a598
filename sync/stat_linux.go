//go:build linux

package sync

import (
	"io/fs"
	"syscall"
)

func statIDs(fi fs.FileInfo) (ctime int64, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Sec*1e9 + st.Ctim.Nsec, st.Ino
	}
	return 0, 0
}
