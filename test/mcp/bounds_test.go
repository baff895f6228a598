package mcptest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peakRSS is the peak resident memory of a process, from /proc.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// Every stream a sandboxed command sends to sbx-mcp is bounded: fd 3 (the
// cwd report), the command's output, a background job's output. Each is
// flooded here with hundreds of MiB; sbx-mcp's memory stays flat and each
// result stays within its cap.
func TestStreamsBounded(t *testing.T) {
	e := newEnv(t)
	os.Mkdir(filepath.Join(e.code, "sub"), 0o755)
	c := e.stdio()
	const maxRSS = 120 << 20

	t.Run("fd 3 flood", func(t *testing.T) {
		c := c.with(t)
		// A command that may cd (cd .) has the report on fd 3; one that
		// cannot (below) has no fd 3 at all.
		res := c.call("bash", map[string]any{"command": "cd .; head -c 200M /dev/zero >&3; echo done"})
		got := text(res)
		wantContains(t, got, "done\n", "Exit code: 0", "report on fd 3 was ignored: it is over 4096 bytes")
		if len(got) > 2000 {
			t.Errorf("result of %d bytes", len(got))
		}
		if s := structured(t, res); s["cwd"] != e.code {
			t.Errorf("structured cwd is %d bytes, want %s", len(fmt.Sprint(s["cwd"])), e.code)
		}
		wantContains(t, c.bash("pwd"), e.code+"\n")
	})
	t.Run("fd 3 of a command that cannot cd", func(t *testing.T) {
		c := c.with(t)
		res := c.call("bash", map[string]any{"command": "head -c 200M /dev/zero >&3; echo done"})
		got := text(res)
		wantContains(t, got, "3: Bad file descriptor", "done\n", "Exit code: 0")
		if strings.Contains(got, "report on fd 3") {
			t.Errorf("an untracked command's fd 3 reached the report:\n%s", got)
		}
		if s := structured(t, res); s["cwd"] != e.code {
			t.Errorf("structured cwd %q, want %s", s["cwd"], e.code)
		}
	})
	t.Run("fd 3 junk before the report", func(t *testing.T) {
		c := c.with(t)
		res := c.call("bash", map[string]any{"command": "cd sub; printf 'junk' >&3"})
		wantContains(t, text(res), `report on fd 3 was ignored: "junk`, "is not one clean absolute path")
		if s := structured(t, res); s["cwd"] != e.code {
			t.Errorf("structured cwd %q, want %s", s["cwd"], e.code)
		}
		wantContains(t, c.bash("pwd"), e.code+"\n")
	})
	t.Run("output flood", func(t *testing.T) {
		c := c.with(t)
		res := c.call("bash", map[string]any{"command": "head -c 300M /dev/zero | tr '\\0' a; echo; echo tail-end"})
		got := text(res)
		wantContains(t, got, "characters truncated] ...", "tail-end\nExit code: 0")
		if len(got) > 31000 {
			t.Errorf("result of %d bytes, over the 30000-character cap", len(got))
		}
	})
	t.Run("background job flood", func(t *testing.T) {
		c := c.with(t)
		res := c.call("bash", map[string]any{"command": "head -c 100M /dev/zero | tr '\\0' b; echo; echo job-end", "run_in_background": true})
		id, _ := structured(t, res)["id"].(string)
		if id == "" {
			t.Fatalf("no job id: %s", text(res))
		}
		deadline := time.Now().Add(60 * time.Second)
		var all strings.Builder
		for {
			r := c.call("bash_output", map[string]any{"id": id})
			out := text(r)
			if len(out) > 31000+200 {
				t.Fatalf("bash_output returned %d bytes, over its cap", len(out))
			}
			all.WriteString(out)
			if structured(t, r)["status"] != "running" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the job did not end within 60s")
			}
		}
		wantContains(t, all.String(), "job-end", "Exit code: 0")
		wantContains(t, all.String(), "bytes of earlier output were dropped")
	})
	if rss := peakRSS(t, c.cmd.Process.Pid); rss > maxRSS {
		t.Errorf("sbx-mcp peaked at %d MiB resident: a stream from the sandbox is not bounded", rss>>20)
	}
}

// The disk limit holds through sbx-mcp (SBX_DISK here): a command whose
// changes are over it brings nothing back, says which limit and how to raise
// it, and the sandbox keeps its files for the next call.
func TestDiskLimit(t *testing.T) {
	e := newEnv(t)
	e.vars = append(e.vars, "SBX_DISK=1MiB")
	c := e.stdio()
	res := c.call("bash", map[string]any{"command": "head -c 1048576 /dev/zero > big; echo small > small; echo ran"})
	got := text(res)
	if !res.IsError {
		t.Fatalf("a pull over the disk limit is not an error: %s", got)
	}
	wantContains(t, got, "ran\n", "over the disk limit of 1MiB", "SBX_DISK=2MiB", "nothing of this command was brought back")
	if _, err := os.Stat(filepath.Join(e.code, "small")); err == nil {
		t.Fatal("small came back though the pull was over the limit")
	}
	wantContains(t, c.bash("rm big; cat small"), "small\n")
	if got := e.read("small"); got != "small\n" {
		t.Fatalf("host has %q after the sandbox went under the limit", got)
	}
}
