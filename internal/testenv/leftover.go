package testenv

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/internal/workroot"
)

// EndSandboxes ends what is left of the local sandboxes whose state lies
// under root, once a test has released what it could: a kept session's
// host daemon (sbx __hostd DIR, DIR below root), each session's init (the
// pid and start time its local.json records, so a reused pid is left
// alone; killing the init ends its whole pid namespace) and the cgroups
// it names, and the workspaces in memory it recorded. A test that fails, breaks its session on purpose or whose
// release fails must still leave no process behind. It returns what it
// had to end, for the test's log: empty when the release did its work.
func EndSandboxes(root string) []string {
	root = filepath.Clean(root)
	var ended []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 3 && args[1] == "__hostd" && strings.HasPrefix(args[2], root+string(filepath.Separator)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(c))); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				ended = append(ended, fmt.Sprintf("host daemon %d of %s", pid, args[2]))
			}
		}
	}
	var workRoots []string // state dirs; after the inits: a workspace in memory may still be in use until then
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == "work" || d.Name() == "rootfs" || d.Name() == "cache") {
			return filepath.SkipDir
		}
		if d.Name() == workroot.File {
			workRoots = append(workRoots, filepath.Dir(p))
		}
		if d.Name() != "local.json" {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var st struct {
			Pid       int      `json:"pid"`
			StartTime uint64   `json:"start_time"`
			Cgroups   []string `json:"cgroups"`
		}
		if json.Unmarshal(raw, &st) != nil || st.Pid <= 1 {
			return nil
		}
		if startTime(st.Pid) == st.StartTime && st.StartTime != 0 {
			if syscall.Kill(st.Pid, syscall.SIGKILL) == nil {
				ended = append(ended, fmt.Sprintf("sandbox init %d of %s", st.Pid, filepath.Dir(p)))
				WaitFor(10*time.Second, func() bool { return startTime(st.Pid) != st.StartTime })
			}
		}
		for _, cg := range st.Cgroups {
			if strings.HasPrefix(cg, "/sys/fs/cgroup/") && !strings.Contains(cg, "..") {
				// Empty once the init's namespace is gone.
				WaitFor(5*time.Second, func() bool {
					err := os.Remove(cg)
					return err == nil || os.IsNotExist(err)
				})
			}
		}
		return nil
	})
	// Workspaces kept in memory (a tmpfs outside root) that no release
	// removed: the state dir's workroot file names them, in the one shape
	// the session itself removes.
	for _, dir := range workRoots {
		if w, ok := workroot.Of(dir); ok {
			if _, err := os.Lstat(w); err == nil {
				os.RemoveAll(w)
				ended = append(ended, fmt.Sprintf("workspaces in memory %s of %s", w, dir))
			}
		}
	}
	return ended
}

// startTime is field 22 of /proc/PID/stat (clock ticks since boot), 0 when
// there is no such process (or only its zombie).
func startTime(pid int) uint64 {
	f := statFields(pid)
	if len(f) < 20 || f[0] == "Z" {
		return 0 // gone, or dead and not yet reaped
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}
