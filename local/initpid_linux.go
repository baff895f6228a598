//go:build linux

package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// InitPid returns the host pid of the init of the sandbox whose state is in
// stateDir, checked to be that process still (by its start time), so that
// what is done to the pid is done to the sandbox and never to a process
// that reused the number. It is for tests and diagnostics that act on a
// sandbox from outside, as a crash or the OOM killer would; the engine
// never needs it.
func InitPid(stateDir string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(stateDir, stateFile))
	if err != nil {
		return 0, fmt.Errorf("read the local sandbox's state: %w", err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil {
		return 0, fmt.Errorf("parse the local sandbox's state %s: %w", filepath.Join(stateDir, stateFile), err)
	}
	b := &box{dir: stateDir, st: st}
	if !b.alive() {
		return 0, fmt.Errorf("the local sandbox's init (pid %d in %s) is not running", st.Pid, filepath.Join(stateDir, stateFile))
	}
	return st.Pid, nil
}
