package mcptest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// TestShellErrorsAsBash: the agent sees what `bash -c "$command"` prints,
// with the command's own line numbers, never sbx's wrapper.
func TestShellErrorsAsBash(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	bash := func(command string) string {
		t.Helper()
		out, _ := exec.Command("bash", "-c", command).CombinedOutput()
		return string(out)
	}
	for _, tc := range []struct{ name, command string }{
		{"command not found", "nonexistent_cmd_xyz"},
		{"third line", "echo a\necho b\nnonexistent_cmd_xyz"},
		{"syntax error echoes the command alone", "; x"},
		{"unterminated", "true\nif"},
		{"LINENO", "echo $LINENO\necho $LINENO"},
		{"$0 and arguments", `echo "$0" $#`},
		{"no BASH_ENV, the command's own text", `echo "${BASH_ENV-unset}"; echo "$BASH_EXECUTION_STRING"`},
		{"fd 4 closed", `ls /proc/self/fd/4 2>&1 | sed 's/ls: //'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.with(t).call("bash", map[string]any{"command": tc.command})
			want := strings.TrimRight(bash(tc.command), "\n")
			out := text(got)
			out = out[:strings.LastIndex(out, "\nExit code: ")]
			if out != want {
				t.Errorf("sbx bash printed\n%s\nbash -c prints\n%s", out, want)
			}
			if strings.Contains(out, "sbx") {
				t.Errorf("the wrapper shows: %s", out)
			}
		})
	}
	t.Run("cwd still tracked", func(t *testing.T) {
		c := c.with(t)
		c.bash("cd /usr")
		wantContains(t, c.bash("pwd"), "/usr\n")
		c.bash("cd " + e.code)
	})
	t.Run("file tools", func(t *testing.T) {
		c := c.with(t)
		got := c.fails("write", map[string]any{"file_path": "/usr/sbx-not-writable", "content": "x"})
		if want := "cannot write /usr/sbx-not-writable: Read-only file system"; !strings.Contains(got, want) {
			t.Errorf("write to a read-only dir: %q, want %q", got, want)
		}
		if strings.Contains(got, "sbx:") || strings.Contains(got, "create") {
			t.Errorf("the file script's shell shows: %s", got)
		}
	})
}

// waitOutput reads a background job's output until it holds want, within
// a deadline.
func (c *client) waitOutput(id, want string) string {
	c.t.Helper()
	var all string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(all, want) {
		if time.Now().After(deadline) {
			c.t.Fatalf("job %s never printed %q; got %q", id, want, all)
		}
		all += c.ok("bash_output", map[string]any{"id": id, "block": true, "timeout": 5000})
	}
	return all
}

// TestConflictNoteNamesRealFiles: a file changed on the host and in the
// sandbox: the note names the file and the copy that exists.
func TestConflictNoteNamesRealFiles(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	e.write("c2.txt", "base\n")
	c.bash("cat c2.txt")
	res := c.call("bash", map[string]any{"command": "echo sandbox > c2.txt; echo written; exec sleep 600", "run_in_background": true})
	id := structured(t, res)["id"].(string)
	c.waitOutput(id, "written")
	e.write("c2.txt", "host\n")
	got := c.ok("bash_kill", map[string]any{"id": id})
	aside := filepath.Join(e.code, "c2.txt.sbx-conflict")
	wantContains(t, got, "Conflict: "+filepath.Join(e.code, "c2.txt")+" changed on the host and in the sandbox; the host's version stays, the sandbox's is in "+aside)
	if strings.Contains(got, ".sbx-conflict.sbx-conflict") {
		t.Errorf("names a file that does not exist: %s", got)
	}
	if b, err := os.ReadFile(aside); err != nil || string(b) != "sandbox\n" {
		t.Errorf("%s: %q %v", aside, b, err)
	}
	if got := e.read("c2.txt"); got != "host\n" {
		t.Errorf("host's c2.txt: %q", got)
	}
}

// TestBashOutputBlocks: bash_output with block waits for new output or the
// job's end, and at most its timeout.
func TestBashOutputBlocks(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	start := func(command string) string {
		t.Helper()
		res := c.call("bash", map[string]any{"command": command, "run_in_background": true})
		return structured(t, res)["id"].(string)
	}
	// The job prints once the test has seen the non-blocking answer: it
	// reads a line from a FIFO the test writes to.
	c.bash("mkfifo /tmp/go /tmp/end")
	id := start("read x < /tmp/go; echo late; read x < /tmp/end; echo last")
	if got := c.ok("bash_output", map[string]any{"id": id}); got != "(no new output)\nStatus: running" {
		t.Fatalf("without block: %q", got)
	}
	c.bash("echo > /tmp/go")
	res := c.call("bash_output", map[string]any{"id": id, "block": true, "timeout": 60000})
	if got := text(res); got != "late\nStatus: running" {
		t.Fatalf("block, new output: %q", got)
	}
	c.bash("echo > /tmp/end")
	got := c.ok("bash_output", map[string]any{"id": id, "block": true, "timeout": 60000})
	if !strings.Contains(got, "Status: exited") {
		// The last line and the end can come in two answers.
		got += "\n" + c.ok("bash_output", map[string]any{"id": id, "block": true, "timeout": 60000})
	}
	wantContains(t, got, "last\n", "Status: exited\nExit code: 0")

	id = start("exec sleep 600")
	t0 := time.Now()
	res = c.call("bash_output", map[string]any{"id": id, "block": true, "timeout": 300})
	if d := time.Since(t0); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("a 300 ms wait took %s", d)
	}
	if got := text(res); got != "(no new output)\nStatus: running" {
		t.Errorf("after the timeout: %q", got)
	}
	wantContains(t, c.fails("bash_output", map[string]any{"id": id, "block": true, "timeout": -1}), "negative")
	c.ok("bash_kill", map[string]any{"id": id})
}

// TestSandboxOnlyWritesSaySo: a file written outside the code dirs, and a
// working directory outside them, are said to stay in the sandbox, once per
// path.
func TestSandboxOnlyWritesSaySo(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	const note = "stays in the sandbox; not synced to the host"
	got := c.ok("write", map[string]any{"file_path": "/tmp/x", "content": "one\n"})
	wantContains(t, got, "File created successfully at: /tmp/x\nNote: the file /tmp/x is outside the code directories ("+e.code+"): it "+note)
	c.ok("read", map[string]any{"file_path": "/tmp/x"})
	if got := c.ok("edit", map[string]any{"file_path": "/tmp/x", "old_string": "one", "new_string": "two"}); strings.Contains(got, note) {
		t.Errorf("said twice for /tmp/x: %s", got)
	}
	wantContains(t, c.ok("write", map[string]any{"file_path": "/tmp/y", "content": "y\n"}), "/tmp/y is outside", note)
	if got := c.ok("write", map[string]any{"file_path": filepath.Join(e.code, "in.txt"), "content": "in\n"}); strings.Contains(got, note) {
		t.Errorf("a code dir file is said to stay in the sandbox: %s", got)
	}
	wantContains(t, c.bash("cd /tmp"), "Note: the working directory /tmp is outside the code directories ("+e.code+"): what is written there "+note)
	if got := c.bash("echo z > z"); strings.Contains(got, note) {
		t.Errorf("said twice for /tmp: %s", got)
	}
	if got := c.bash("cd " + e.code + " && echo here"); strings.Contains(got, note) {
		t.Errorf("a code dir cwd is said to stay in the sandbox: %s", got)
	}
	if _, err := os.Stat("/tmp/x"); err == nil {
		if b, _ := os.ReadFile("/tmp/x"); string(b) == "two\n" {
			t.Errorf("/tmp/x reached the host")
		}
	}
}

// signalWriter tells when a line holding want has been written through it.
type signalWriter struct {
	w    io.WriteCloser
	want string
	seen chan struct{}
	once sync.Once
}

func (s *signalWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if strings.Contains(string(p), s.want) {
		s.once.Do(func() { close(s.seen) })
	}
	return n, err
}

func (s *signalWriter) Close() error { return s.w.Close() }

// TestEOFFinishesCalls: a client that sends a call and closes stdin gets
// its answer, its change reaches the host, and then sbx-mcp exits and
// releases the sandbox.
func TestEOFFinishesCalls(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(binary)
	cmd.Dir, cmd.Env = e.code, e.vars
	stderr := &sandboxtest.Buffer{}
	cmd.Stderr = stderr
	defer checkStderr(t, stderr)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sw := &signalWriter{w: in, want: `"tools/call"`, seen: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-test"}, nil).Connect(ctx, &mcp.IOTransport{Reader: out, Writer: sw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 1; echo done > eof.txt; echo finished"}})
		got <- answer{res, err}
	}()
	<-sw.seen
	in.Close() // the request is written; the client closes its end
	a := <-got
	if a.err != nil {
		t.Fatalf("the call in flight at EOF: %v", a.err)
	}
	if txt := text(a.res); txt != "finished\nExit code: 0" {
		t.Errorf("answer %q", txt)
	}
	if got := e.read("eof.txt"); got != "done\n" {
		t.Errorf("host eof.txt %q", got)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sbx-mcp exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("sbx-mcp did not exit after the last answer")
	}
	e.checkReleased()
}

// TestReadBeforeWrite: write and edit refuse an existing file the session
// has not read, or that changed (on the host, or by a command) since.
func TestReadBeforeWrite(t *testing.T) {
	e := newEnv(t)
	f := e.write("a.txt", "host\n")
	c := e.stdio()
	const notRead = "File has not been read yet. Read it first before writing to it."
	const changed = "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."
	if got := c.fails("write", map[string]any{"file_path": f, "content": "agent\n"}); got != notRead {
		t.Errorf("write unread: %q", got)
	}
	if got := c.fails("edit", map[string]any{"file_path": f, "old_string": "host", "new_string": "agent"}); got != notRead {
		t.Errorf("edit unread: %q", got)
	}
	if got := e.read("a.txt"); got != "host\n" {
		t.Fatalf("an unread file was overwritten: %q", got)
	}
	c.ok("read", map[string]any{"file_path": f, "limit": 1})
	c.ok("edit", map[string]any{"file_path": f, "old_string": "host", "new_string": "agent"})
	c.ok("write", map[string]any{"file_path": f, "content": "agent 2\n"}) // its own write counts as read

	e.write("a.txt", "host again\n")
	if got := c.fails("edit", map[string]any{"file_path": f, "old_string": "agent", "new_string": "x"}); got != changed {
		t.Errorf("edit after a host change: %q", got)
	}
	if got := c.fails("write", map[string]any{"file_path": f, "content": "x\n"}); got != changed {
		t.Errorf("write after a host change: %q", got)
	}
	if got := e.read("a.txt"); got != "host again\n" {
		t.Fatalf("the host's change was overwritten: %q", got)
	}
	c.ok("read", map[string]any{"file_path": f})
	c.ok("write", map[string]any{"file_path": f, "content": "after read\n"})

	c.bash("echo by a command >> a.txt")
	if got := c.fails("write", map[string]any{"file_path": f, "content": "x\n"}); got != changed {
		t.Errorf("write after a command changed it: %q", got)
	}
	// Created by write in the session: counts as read; a new file needs none.
	n := filepath.Join(e.code, "new.txt")
	c.ok("write", map[string]any{"file_path": n, "content": "new\n"})
	c.ok("edit", map[string]any{"file_path": n, "old_string": "new", "new_string": "newer"})
	if got := e.read("new.txt"); got != "newer\n" {
		t.Errorf("new.txt %q", got)
	}
}

// TestApplyPatch: Codex's patch grammar applied in the sandbox and brought
// back; a chunk that does not match changes nothing and says which.
func TestApplyPatch(t *testing.T) {
	e := newEnv(t)
	e.write("src/main.py", "def main():\n    print('hi')\n    return 0\n")
	e.write("old.txt", "old\n")
	e.write("gone.txt", "bye\n")
	c := e.stdio()
	got := c.ok("apply_patch", map[string]any{"input": `*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/main.py
@@ def main():
-    print('hi')
+    print('hello')
     return 0
*** Update File: old.txt
*** Move to: renamed.txt
-old
+new
*** Delete File: gone.txt
*** End Patch`})
	want := "Success. Updated the following files:\nA " + e.code + "/docs/new.md\nM " + e.code + "/src/main.py\nD " + e.code + "/old.txt\nA " + e.code + "/renamed.txt\nD " + e.code + "/gone.txt"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for rel, content := range map[string]string{"docs/new.md": "# New\ntext\n", "src/main.py": "def main():\n    print('hello')\n    return 0\n", "renamed.txt": "new\n"} {
		if g := e.read(rel); g != content {
			t.Errorf("host %s: %q, want %q", rel, g, content)
		}
	}
	for _, rel := range []string{"old.txt", "gone.txt"} {
		if _, err := os.Stat(filepath.Join(e.code, rel)); !os.IsNotExist(err) {
			t.Errorf("%s still on the host: %v", rel, err)
		}
	}

	// The second file's chunk does not match: nothing is written.
	got = c.fails("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: never.txt\n+x\n*** Update File: src/main.py\n@@\n-    print('absent')\n+    print('x')\n*** End Patch\n"})
	wantContains(t, got, "chunk 1 (patch line 5): failed to find expected lines in "+e.code+"/src/main.py:\n    print('absent')", "Nothing was changed.")
	if _, err := os.Stat(filepath.Join(e.code, "never.txt")); !os.IsNotExist(err) {
		t.Errorf("a failed patch added never.txt: %v", err)
	}
	wantContains(t, c.fails("apply_patch", map[string]any{"input": "*** Update File: x\n"}), "the first line of the patch must be '*** Begin Patch'")
	wantContains(t, c.fails("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch"}), "failed to delete "+e.code+"/nope.txt: the file does not exist")
}

// TestNewcomerHints: what a newcomer meets in the sandbox that only the host
// can fix says why and what to do, once per session. git without an
// identity (the test's HOME has no git config) and a virtualenv's
// interpreter link, which never comes back.
func TestNewcomerHints(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	const identity = "git has no author identity in the sandbox"
	commit := "git init -q /tmp/r && cd /tmp/r && git commit --allow-empty -qm x"
	wantContains(t, c.bash(commit), "Please tell me who you are", identity, "Set them on the host (git config --global user.name")
	if got := c.bash(commit); strings.Contains(got, identity) {
		t.Errorf("the identity hint came twice: %s", got)
	}
	// The link python3 -m venv makes, without needing the venv module.
	got := c.bash("cd " + e.code + " && mkdir -p .venv/bin && ln -s /usr/bin/python3 .venv/bin/python")
	wantContains(t, got, ".venv/bin/python", "a Python virtualenv in a code dir links its interpreter", "python3 -m venv ~/.venvs/NAME", ".sbxignore")
	if _, err := os.Lstat(filepath.Join(e.code, ".venv", "bin", "python")); err == nil {
		t.Errorf("the venv's interpreter link came back to the host")
	}
}
