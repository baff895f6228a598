//go:build unix

package hostrun

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttrs starts the command in a new session: it has no controlling
// terminal (so ssh and git cannot prompt on /dev/tty) and is the leader of
// its own process group, which cancellation kills as a whole (git's ssh and
// remote helpers included).
func setProcAttrs(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	c.Cancel = func() error {
		return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

// exitStatus reports the status as a shell would: 128+N for signal N.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
