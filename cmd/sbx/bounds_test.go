package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMeasured runs sbx and returns its result and the peak resident memory
// of the sbx process (and the processes it waited for), in bytes.
func (w *world) runMeasured(t *testing.T, env []string, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, args...)
	cmd.Dir = w.code
	cmd.Env = append(append([]string{}, w.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sbx %v: %v", args, err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return result{stdout.String(), stderr.String(), code}, ru.Maxrss << 10
}

// A command that floods fd 3 (where the shell reports its working
// directory) costs the host nothing: sbx reads at most PATH_MAX of it,
// ignores the report and says so. It once grew sbx to 22 GB.
func TestFd3FloodIsBounded(t *testing.T) {
	w := newWorld(t)
	r, rss := w.runMeasured(t, nil, "exec", "--", "head -c 400M /dev/zero >&3; echo done")
	if r.code != 0 || r.stdout != "done\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if rss > 150<<20 {
		t.Errorf("sbx peaked at %d MiB resident for a 400 MiB flood of fd 3: the report is not bounded", rss>>20)
	}
	if !strings.Contains(r.stderr, "fd 3 was ignored") || !strings.Contains(r.stderr, "over 4096 bytes") {
		t.Errorf("no note about the ignored report; stderr:\n%s", r.stderr)
	}
}

// children lists the host pids whose parent is pid and whose command line
// starts with name.
func children(pid int, name string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(d + "/cmdline")
		if strings.HasPrefix(string(cmdline), name+"\x00") {
			p, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, p)
		}
	}
	return out
}

// The kernel may kill an idle worker (the OOM killer, say): the init must
// never hand a command to a dead one. It once failed a command with exit
// 125 "hand the command to a worker: write unix @: sendmsg: broken pipe".
func TestDeadIdleWorkersReplaced(t *testing.T) {
	w := newWorld(t)
	if r := w.sbx(t, w.code, "exec", "--keep", "--session", "dw", "--", "true"); r.code != 0 {
		t.Fatalf("exec: %d %s", r.code, r.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(w.state, "sbx", "sessions", "dw", "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Pid int }
	if err := json.Unmarshal(raw, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("local.json %s: %v", raw, err)
	}
	for round := range 3 {
		var idle []int
		deadline := time.Now().Add(20 * time.Second)
		for idle = children(st.Pid, "sbx-worker"); len(idle) == 0; idle = children(st.Pid, "sbx-worker") {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no idle worker under the init (pid %d) after 20s", round, st.Pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, p := range idle {
			syscall.Kill(p, syscall.SIGKILL)
		}
		deadline = time.Now().Add(20 * time.Second)
		for _, p := range idle {
			for {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err != nil {
					break
				}
				if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); strings.Contains(string(stat), ") Z ") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("worker %d did not die", p)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		r := w.sbx(t, w.code, "exec", "--keep", "--session", "dw", "--", "echo alive")
		if r.code != 0 || r.stdout != "alive\n" {
			t.Fatalf("round %d: after its %d idle workers were killed, a command failed: exit %d, stdout %q, stderr:\n%s", round, len(idle), r.code, r.stdout, r.stderr)
		}
	}
}
