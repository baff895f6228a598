package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// runMeasured runs sbx and returns its result and the peak resident memory
// of the sbx process (and the processes it waited for), in bytes. With
// discard, its stdout is drained and thrown away.
func (w *world) runMeasured(t *testing.T, env []string, args ...string) (result, int64) {
	return w.runMeasuredOut(t, false, env, args...)
}

func (w *world) runMeasuredOut(t *testing.T, discard bool, env []string, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, args...)
	cmd.Dir = w.code
	cmd.Env = append(append([]string{}, w.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if discard {
		cmd.Stdout = io.Discard
	}
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
	for _, p := range testenv.Children(pid) {
		if p.State != "Z" && p.Argv[0] == name {
			out = append(out, p.Pid)
		}
	}
	return out
}

// The kernel may kill an idle worker (the OOM killer, say): the init must
// never hand a command to a dead one. It once failed a command with exit
// 125 "hand the command to a worker: write unix @: sendmsg: broken pipe".
//
// A killed Go worker's main thread shows as a zombie while its other
// threads still hold its descriptors: a command handed over then is taken by
// the kernel and lost with the worker ("recvmsg: connection reset by peer").
// The kept session's host daemon is off here, so that each command reaches
// the init as soon after the kill as a CLI can, inside that window.
func TestDeadIdleWorkersReplaced(t *testing.T) {
	w := newWorld(t)
	noDaemon := []string{"SBX_HOST_DAEMON=false"}
	if r := w.sbxEnv(t, w.code, noDaemon, "exec", "--keep", "--session", "dw", "--", "true"); r.code != 0 {
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
		r := w.sbxEnv(t, w.code, noDaemon, "exec", "--keep", "--session", "dw", "--", "echo alive")
		if r.code != 0 || r.stdout != "alive\n" {
			t.Fatalf("round %d: after its %d idle workers were killed, a command failed: exit %d, stdout %q, stderr:\n%s", round, len(idle), r.code, r.stdout, r.stderr)
		}
	}
}

// What one command brings back is bounded by the disk limit (--disk here):
// over it, nothing comes back, the error names the limit and how to raise
// it, and the sandbox keeps its files, so removing the big one there lets
// the rest come back.
func TestDiskLimitRefusesPull(t *testing.T) {
	w := newWorld(t)
	before := treeHash(t, w.code)
	r := w.sbx(t, w.code, "exec", "--keep", "--session", "d", "--disk", "1MiB", "--",
		"head -c 1048576 /dev/zero > big; echo small > small; echo ran")
	if r.code != 125 || r.stdout != "ran\n" {
		t.Fatalf("exit %d, stdout %q, want 125 after the command ran; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	wantIn(t, r.stderr, "over the disk limit of 1MiB", `disk = "2MiB"`, "SBX_DISK=2MiB", "--disk 2MiB",
		"nothing of this command was brought back, and the sandbox keeps its files")
	if got := treeHash(t, w.code); got != before {
		t.Fatal("the host tree changed though the pull was refused")
	}
	// Still refused while the sandbox holds too much; its files are there.
	r = w.sbx(t, w.code, "exec", "--session", "d", "--disk", "1MiB", "--", "wc -c < big; cat small")
	if r.code != 125 || r.stdout != "1048576\nsmall\n" {
		t.Fatalf("second command: exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = w.sbx(t, w.code, "exec", "--session", "d", "--disk", "1MiB", "--", "rm big")
	if r.code != 0 {
		t.Fatalf("after removing the big file: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(w.code, "small")); err != nil || string(b) != "small\n" {
		t.Fatalf("small not brought back once under the limit: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(w.code, "big")); err == nil {
		t.Fatal("big came back")
	}
}

// The workspace itself is bounded too: files the sync never brings back
// (excluded ones) count against the disk limit on the host's disk.
func TestDiskLimitCountsWorkspace(t *testing.T) {
	w := newWorld(t)
	r := w.sbx(t, w.code, "exec", "--disk", "1MiB", "--",
		"mkdir -p node_modules/.cache; head -c 700000 /dev/urandom > node_modules/.cache/blob; head -c 700000 /dev/urandom > kept; echo ran")
	if r.code != 125 || r.stdout != "ran\n" {
		t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	wantIn(t, r.stderr, "the sandbox's files take more than", "of the host's disk, over the disk limit of 1MiB", "--disk 2MiB")
	if _, err := os.Stat(filepath.Join(w.code, "kept")); err == nil {
		t.Fatal("kept came back though the workspace is over the limit")
	}
	// One file past the limit is stopped by the kernel while it is written.
	r = w.sbx(t, w.code, "exec", "--disk", "1MiB", "--", "head -c 2000000 /dev/zero > one; echo $?; wc -c < one")
	if r.stdout != "153\n1048576\n" {
		t.Fatalf("a file past the limit: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}
	// No limit: 0.
	r = w.sbx(t, w.code, "exec", "--disk", "0", "--", "head -c 2000000 /dev/zero > one")
	if r.code != 0 {
		t.Fatalf("--disk 0: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(w.code, "one")); err != nil || fi.Size() != 2000000 {
		t.Fatalf("--disk 0: %v %v", fi, err)
	}
	r = w.sbx(t, w.code, "exec", "--disk", "lots", "--", "true")
	wantIn(t, r.stderr, "--disk", "not a size")
}

func wantIn(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
}

// The sync's reply is bounded: a nested repository of 30000 files is 30000
// changes kept in the sandbox, over 8 MiB of refusals, which once lost the
// round trip (a frame over its limit). Now the list is cut and says so.
func TestSyncReplyBounded(t *testing.T) {
	w := newWorld(t)
	name := strings.Repeat("n", 200)
	r := w.sbx(t, w.code, "exec", "--", "mkdir -p sub/.git/objects && cd sub/.git/objects && i=0; while [ $i -lt 30000 ]; do : > "+name+"$i; i=$((i+1)); done; echo made > ../../kept.txt; echo done")
	if r.code != 0 || r.stdout != "done\n" {
		t.Fatalf("exit %d, stdout %q, stderr (%d bytes):\n%.2000s", r.code, r.stdout, len(r.stderr), r.stderr)
	}
	wantIn(t, r.stderr, "more changes kept in the sandbox (the list is cut at 524288 bytes)")
	if len(r.stderr) > 2<<20 {
		t.Errorf("%d bytes of notes", len(r.stderr))
	}
	if b, err := os.ReadFile(filepath.Join(w.code, "sub", "kept.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("the rest of the pull did not come back: %q %v", b, err)
	}
}

// A command's output reaches sbx exec's stdout without sbx holding it: the
// sandbox writes to sbx's own descriptor.
func TestOutputFloodNotHeld(t *testing.T) {
	w := newWorld(t)
	r, rss := w.runMeasuredOut(t, true, nil, "exec", "--", "head -c 500M /dev/zero")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if rss > 150<<20 {
		t.Errorf("sbx peaked at %d MiB resident for 500 MiB of output", rss>>20)
	}
}

// The workspace counts what the host will write, not what the sandbox's
// file system stores: a sparse file is its full length on the host and a
// hard link a copy. Each command alone is under the limit, the sum is not.
func TestDiskLimitCountsSparseFilesAndLinks(t *testing.T) {
	w := newWorld(t)
	t.Cleanup(func() { w.sbx(t, w.code, "release", "--session", "sparse") })
	r := w.sbx(t, w.code, "exec", "--keep", "--session", "sparse", "--disk", "4MiB", "--", "truncate -s 3M s1")
	if r.code != 0 {
		t.Fatalf("first sparse file: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = w.sbx(t, w.code, "exec", "--keep", "--session", "sparse", "--disk", "4MiB", "--", "truncate -s 3M s2")
	if r.code != 125 {
		t.Fatalf("second sparse file: exit %d, want 125 (6 MiB for the host over a 4 MiB limit); stderr:\n%s", r.code, r.stderr)
	}
	wantIn(t, r.stderr, "over the disk limit of 4MiB")
	if _, err := os.Stat(filepath.Join(w.code, "s2")); err == nil {
		t.Fatal("s2 came back though the host would hold 6 MiB")
	}

	w2 := newWorld(t)
	r = w2.sbx(t, w2.code, "exec", "--disk", "4MiB", "--", "head -c 600000 /dev/urandom > h; for i in 1 2 3 4 5 6 7 8; do ln h h$i; done")
	if r.code != 125 {
		t.Fatalf("nine names of one 600 kB file: exit %d, want 125; stderr:\n%s", r.code, r.stderr)
	}
	wantIn(t, r.stderr, "over the disk limit of 4MiB")
}
