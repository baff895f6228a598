package inpod

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func setSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// exited reports whether the child pid has exited or is exiting, without
// reaping it (its Wait still does).
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// Linux zeroes info when the child has not exited; else Signo is
	// SIGCHLD.
	if err != nil || info.Signo != 0 {
		return true
	}
	// A killed child with threads (a Go program: the spare is one) shows
	// its leader a zombie while its other threads still exit, and waitid
	// reports nothing until all have: a call handed to it met its end
	// (CI's TestMuxSpareKilledWhileWaiting, once). A Go program's leader
	// thread never exits alone.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}
