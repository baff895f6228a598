//go:build unix

package app

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every descriptor this process inherited
// beyond stdin, stdout and stderr close-on-exec (Go opens its own so): a
// descriptor the caller left open (a shell's `exec 7>...`, a flock'd lock
// file, the pipe of a $(...) around a script) then reaches no process sbx
// starts. Without it, a kept session's host daemon held such a descriptor
// for as long as it served (a caller reading to the pipe's end hung, a lock
// stayed taken), and a local sandbox's init, inside the sandbox's
// namespaces, had the caller's host files open.
func closeInheritedOnExec() {
	dir := "/proc/self/fd"
	if _, err := os.Stat(dir); err != nil {
		dir = "/dev/fd"
	}
	names, err := readDirNames(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
