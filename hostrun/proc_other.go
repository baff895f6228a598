//go:build !unix

package hostrun

import (
	"os"
	"os/exec"
)

// setProcAttrs keeps os/exec's defaults: cancellation kills the process.
func setProcAttrs(c *exec.Cmd) {}

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
