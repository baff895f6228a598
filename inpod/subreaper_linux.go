package inpod

import "golang.org/x/sys/unix"

func setSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// exited reports whether the child pid has exited, without reaping it (its
// Wait still does).
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	// Linux zeroes info when the child has not exited; else Signo is
	// SIGCHLD.
	return err != nil || info.Signo != 0
}
