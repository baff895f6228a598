//go:build linux

package sync

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// regularEntry is the entry of a regular file as a stat of it found it
// (entryOf's, from the system call's own result).
func regularEntry(st *unix.Stat_t) Entry {
	return Entry{Mode: fs.FileMode(st.Mode & 0o777), Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Ino: st.Ino}
}

func statIDs(fi fs.FileInfo) (ctime int64, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Sec*1e9 + st.Ctim.Nsec, st.Ino
	}
	return 0, 0
}
