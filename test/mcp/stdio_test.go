package mcptest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

func TestStartClaimsNothing(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	if _, err := c.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if s := e.sessions(); len(s) != 0 {
		t.Fatalf("sessions exist before any tool call: %v", s)
	}
	c.bash("true")
	if s := e.sessions(); len(s) != 1 {
		t.Fatalf("after one call: sessions %v, want one", s)
	}
}

func TestBash(t *testing.T) {
	e := newEnv(t)
	os.Mkdir(filepath.Join(e.code, "sub"), 0o755)
	c := e.stdio()

	t.Run("output and exit code", func(t *testing.T) {
		c := c.with(t)
		res := c.call("bash", map[string]any{"command": "echo out; echo err >&2; echo again; exit 3", "description": "prints"})
		if res.IsError {
			t.Fatalf("a failing command is a result, not an error: %s", text(res))
		}
		if got, want := text(res), "out\nerr\nagain\nExit code: 3"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		s := structured(t, res)
		if s["exit_code"] != 3.0 || s["timed_out"] != false || s["truncated"] != false || s["cwd"] != e.code {
			t.Fatalf("structured %v", s)
		}
		if _, ok := s["duration_ms"]; !ok {
			t.Fatalf("no duration_ms in %v", s)
		}
	})
	t.Run("starts where the server started", func(t *testing.T) {
		c := c.with(t)
		wantContains(t, c.bash("pwd"), e.code+"\n")
	})
	t.Run("cwd persists, variables do not", func(t *testing.T) {
		c := c.with(t)
		c.bash("cd sub && export FOO=bar")
		got := c.bash(`pwd; echo "FOO=${FOO:-unset}"`)
		wantContains(t, got, e.code+"/sub\n", "FOO=unset")
		c.bash("cd " + e.code)
	})
	t.Run("changes reach the host", func(t *testing.T) {
		c := c.with(t)
		c.bash("mkdir -p made && echo hi > made/file")
		if got := e.read("made/file"); got != "hi\n" {
			t.Fatalf("host has %q", got)
		}
	})
	t.Run("host changes reach the sandbox", func(t *testing.T) {
		c := c.with(t)
		e.write("from-host.txt", "host\n")
		wantContains(t, c.bash("cat from-host.txt"), "host\n")
	})
	t.Run("no output", func(t *testing.T) {
		c := c.with(t)
		if got := c.bash("true"); got != "(no output)\nExit code: 0" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("long output keeps head and tail", func(t *testing.T) {
		c := c.with(t)
		res := c.call("bash", map[string]any{"command": "seq 1 100000"})
		got := text(res)
		if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "99999\n100000\nExit code: 0") {
			t.Fatalf("head or tail missing: %q ... %q", got[:20], got[len(got)-40:])
		}
		wantContains(t, got, "characters truncated] ...")
		if len(got) > 30200 {
			t.Fatalf("%d characters", len(got))
		}
		if s := structured(t, res); s["truncated"] != true {
			t.Fatalf("structured %v", s)
		}
	})
	t.Run("invalid UTF-8 replaced", func(t *testing.T) {
		c := c.with(t)
		if got := c.bash(`printf 'a\377b\n'`); got != "a\uFFFDb\nExit code: 0" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("timeout kills the tree", func(t *testing.T) {
		c := c.with(t)
		// A child in the background and the command itself, both running
		// (the command says so once ps shows the child) when the timeout
		// strikes; after it, neither is left on the host.
		m := marker(t)
		start := time.Now()
		res := c.call("bash", map[string]any{"command": "(exec -a " + m + "-bg sleep 300 >/dev/null 2>&1 3>&-) & " +
			"until ps -eo args | grep -q '^" + m + "-bg'; do sleep 0.01; done; echo started; exec -a " + m + "-fg sleep 300", "timeout": 3000})
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("took %s", d)
		}
		got := text(res)
		wantContains(t, got, "started\n", "Command timed out after 3s and was killed with everything it started.", "Exit code: 124")
		if s := structured(t, res); s["timed_out"] != true || s["exit_code"] != 124.0 {
			t.Fatalf("structured %v", s)
		}
		if !testenv.WaitFor(10*time.Second, func() bool { return len(testenv.HostProcs(m)) == 0 }) {
			t.Fatalf("processes survived the timeout: %v", testenv.HostProcs(m))
		}
	})
	t.Run("cwd removed", func(t *testing.T) {
		c := c.with(t)
		c.bash("mkdir -p /tmp/gone && cd /tmp/gone")
		c.bash("rmdir /tmp/gone")
		wantContains(t, c.bash("pwd"), e.code+"\n", "sbx: /tmp/gone no longer exists; running in "+e.code)
		wantContains(t, c.bash("pwd"), e.code+"\nExit code: 0")
	})
	t.Run("errors", func(t *testing.T) {
		c := c.with(t)
		wantContains(t, c.fails("bash", map[string]any{"command": "  "}), "command is empty")
		wantContains(t, c.fails("bash", map[string]any{"command": strings.Repeat("x", 200000)}), "over the limit of 131071")
		wantContains(t, c.fails("bash", map[string]any{"command": "true", "timeout": -5}), "negative")
		wantContains(t, c.fails("bash", map[string]any{"command": 42}), "validating")
		wantContains(t, c.fails("bash", map[string]any{"command": "true", "timeout": "soon"}), "validating")
		wantContains(t, c.fails("bash", map[string]any{}), "command")
		c.bash("true") // still serving
	})
}

func TestBackgroundJobs(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	res := c.call("bash", map[string]any{"command": "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo job > job.txt", "run_in_background": true})
	id, _ := structured(t, res)["id"].(string)
	if id == "" || res.IsError {
		t.Fatalf("no id: %s", text(res))
	}
	wantContains(t, text(res), id)
	var all string
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.call("bash_output", map[string]any{"id": id})
		all += text(r)
		if s := structured(t, r); s["status"] == "exited" {
			if s["exit_code"] != 0.0 {
				t.Fatalf("structured %v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job did not end: %s", all)
		}
		time.Sleep(200 * time.Millisecond)
	}
	wantContains(t, all, "line1", "line2", "line3", "Status: exited\nExit code: 0")
	if strings.Count(all, "line2") != 1 {
		t.Fatalf("output repeated: %s", all)
	}
	wantContains(t, c.ok("bash_output", map[string]any{"id": id}), "(no new output)")
	if got := e.read("job.txt"); got != "job\n" {
		t.Fatalf("job's file on the host: %q", got)
	}

	// A running job does not block other calls; bash_kill stops it.
	res = c.call("bash", map[string]any{"command": "echo started; sleep 60", "run_in_background": true})
	id2 := structured(t, res)["id"].(string)
	c.bash("true")
	wantContains(t, c.ok("bash_output", map[string]any{"id": id2, "block": true, "timeout": 20000}), "started", "Status: running")
	wantContains(t, c.ok("bash_kill", map[string]any{"id": id2}), "was killed")
	r := c.call("bash_output", map[string]any{"id": id2})
	if s := structured(t, r); s["status"] != "killed" {
		t.Fatalf("after kill: %v %s", s, text(r))
	}
	wantContains(t, c.fails("bash_output", map[string]any{"id": "bash_99"}), `no background job with id "bash_99"`)
	wantContains(t, c.fails("bash_kill", map[string]any{"id": "nope"}), `no background job with id "nope"`)

	// Jobs end with the session, and what they did comes back first.
	res = c.call("bash", map[string]any{"command": "echo partial > partial.txt; echo wrote; sleep 60", "run_in_background": true})
	id3 := structured(t, res)["id"].(string)
	wantContains(t, c.ok("bash_output", map[string]any{"id": id3, "block": true, "timeout": 20000}), "wrote", "Status: running")
	if _, err := os.Stat(filepath.Join(e.code, "partial.txt")); err == nil {
		t.Fatal("partial.txt is on the host before the release: the release is not what brings it back")
	}
	c.ok("release", nil)
	wantContains(t, c.fails("bash_output", map[string]any{"id": id3}), "no background job")
	if got := e.read("partial.txt"); got != "partial\n" {
		t.Fatalf("a released job's file on the host: %q", got)
	}
}

func TestRead(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	var long strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	e.write("long.txt", long.String())
	e.write("small.txt", "alpha\nbeta\n")
	e.write("empty.txt", "")
	e.write("wide.txt", strings.Repeat("w", 2500)+"\n")
	e.write("bin.dat", "\x00\x01\x02binary")
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
	e.write("pixel.png", string(png))
	os.Mkdir(filepath.Join(e.code, "adir"), 0o755)

	if got, want := c.ok("read", map[string]any{"file_path": e.code + "/small.txt"}), "     1\talpha\n     2\tbeta"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	got := c.ok("read", map[string]any{"file_path": e.code + "/long.txt"})
	wantContains(t, got, "     1\tline 1\n", "  2000\tline 2000\n", "(showing lines 1-2000 of 2500")
	if strings.Contains(got, "line 2001") {
		t.Fatal("read past the default limit")
	}
	if got, want := c.ok("read", map[string]any{"file_path": e.code + "/long.txt", "offset": 2499, "limit": 5}), "  2499\tline 2499\n  2500\tline 2500"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	wantContains(t, c.ok("read", map[string]any{"file_path": e.code + "/empty.txt"}), "exists but is empty")
	wantContains(t, c.ok("read", map[string]any{"file_path": e.code + "/wide.txt"}), strings.Repeat("w", 2000)+"... [line truncated]")
	wantContains(t, c.ok("read", map[string]any{"file_path": "/etc/hostname"}), "1\t")

	res := c.call("read", map[string]any{"file_path": e.code + "/pixel.png"})
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("image: %v", res)
	}
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || string(img.Data) != string(png) {
		t.Fatalf("image content %#v", res.Content[0])
	}

	for _, tt := range []struct{ path, want string }{
		{e.code + "/adir", "is a directory"},
		{e.code + "/missing.txt", "File does not exist: " + e.code + "/missing.txt"},
		{"small.txt", `file_path must be an absolute path, not a relative path: "small.txt"`},
		{"/dev/null", "not a regular file"},
		{e.code + "/bin.dat", "binary file"},
	} {
		wantContains(t, c.fails("read", map[string]any{"file_path": tt.path}), tt.want)
	}
	wantContains(t, c.fails("read", map[string]any{"file_path": e.code + "/small.txt", "offset": "x"}), "validating")
}

func TestWrite(t *testing.T) {
	e := newEnv(t)
	script := e.write("run.sh", "#!/bin/sh\necho old\n")
	os.Chmod(script, 0o755)
	c := e.stdio()
	p := e.code + "/new/dir/file.txt"
	if got := c.ok("write", map[string]any{"file_path": p, "content": "one\ntwo\n"}); got != "File created successfully at: "+p {
		t.Fatalf("got %q", got)
	}
	if got := e.read("new/dir/file.txt"); got != "one\ntwo\n" {
		t.Fatalf("host has %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(e.code, "new/dir/file.txt")); fi.Mode().Perm() != 0o644 {
		t.Fatalf("new file mode %v, want 0644", fi.Mode())
	}
	c.ok("read", map[string]any{"file_path": script})
	if got := c.ok("write", map[string]any{"file_path": script, "content": "#!/bin/sh\necho new\n"}); got != "The file "+script+" has been updated successfully." {
		t.Fatalf("got %q", got)
	}
	if fi, _ := os.Stat(script); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755 kept", fi.Mode())
	}
	wantContains(t, c.bash("./run.sh"), "new")
	c.ok("write", map[string]any{"file_path": e.code + "/empty", "content": ""})
	if got := e.read("empty"); got != "" {
		t.Fatalf("got %q", got)
	}
	// Files host tools trust do not reach the host on their own.
	wantContains(t, c.ok("write", map[string]any{"file_path": e.code + "/.mcp.json", "content": "{}"}), "Quarantined: "+e.code+"/.mcp.json")
	if _, err := os.Stat(filepath.Join(e.code, ".mcp.json")); err == nil {
		t.Fatal(".mcp.json written by the sandbox reached the host")
	}
	// Outside the code dirs: in the sandbox only.
	c.ok("write", map[string]any{"file_path": "/tmp/scratch.txt", "content": "s"})
	wantContains(t, c.ok("read", map[string]any{"file_path": "/tmp/scratch.txt"}), "1\ts")
	wantContains(t, c.fails("write", map[string]any{"file_path": "rel.txt", "content": "x"}), "must be an absolute path")
	wantContains(t, c.fails("write", map[string]any{"file_path": e.code + "/new", "content": "x"}), "is a directory")
	wantContains(t, c.fails("write", map[string]any{"file_path": e.code + "/run.sh/below", "content": "x"}), "cannot create the parent directory")
	wantContains(t, c.fails("write", map[string]any{"file_path": "/usr/sbx-test", "content": "x"}), "/usr/sbx-test")
	wantContains(t, c.fails("write", map[string]any{"file_path": e.code + "/x", "content": strings.Repeat("x", 17<<20)}), "over the limit")
}

func TestEdit(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	f := e.write("f.go", "package f\n\nfunc a() { x := 1 }\nfunc b() { x := 1 }\n")
	crlf := e.write("win.txt", "one\r\ntwo\r\nthree\r\n")
	edit := func(old, new string, all bool) *mcp.CallToolResult {
		return c.call("edit", map[string]any{"file_path": f, "old_string": old, "new_string": new, "replace_all": all})
	}
	before := e.read("f.go")
	c.ok("read", map[string]any{"file_path": f})
	c.ok("read", map[string]any{"file_path": crlf})
	for _, tt := range []struct {
		name, old, new, want string
	}{
		{"two matches", "x := 1", "x := 2", "Found 2 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance."},
		{"absent", "y := 1", "y := 2", "String to replace not found in file."},
		{"same", "x := 1", "x := 1", "No changes to make: old_string and new_string are exactly the same."},
	} {
		res := edit(tt.old, tt.new, false)
		if !res.IsError || text(res) != tt.want {
			t.Errorf("%s: got %q (error %v), want %q", tt.name, text(res), res.IsError, tt.want)
		}
		if e.read("f.go") != before {
			t.Fatalf("%s: the file changed", tt.name)
		}
	}
	res := edit("func a() { x := 1 }", "func a() { x := 3 }", false)
	if res.IsError {
		t.Fatal(text(res))
	}
	wantContains(t, text(res), "The file "+f+" has been updated.", "     3\tfunc a() { x := 3 }")
	if got := e.read("f.go"); got != "package f\n\nfunc a() { x := 3 }\nfunc b() { x := 1 }\n" {
		t.Fatalf("host has %q", got)
	}
	res = edit("x := ", "y := ", true)
	wantContains(t, text(res), "All 2 occurrences were replaced")
	if got := e.read("f.go"); strings.Count(got, "y := ") != 2 {
		t.Fatalf("host has %q", got)
	}

	c.ok("edit", map[string]any{"file_path": crlf, "old_string": "one\ntwo", "new_string": "1\n2"})
	if got := e.read("win.txt"); got != "1\r\n2\r\nthree\r\n" {
		t.Fatalf("CRLF file now %q", got)
	}

	created := e.code + "/brand/new.txt"
	wantContains(t, c.ok("edit", map[string]any{"file_path": created, "old_string": "", "new_string": "fresh\n"}), "File created successfully")
	if got := e.read("brand/new.txt"); got != "fresh\n" {
		t.Fatalf("got %q", got)
	}
	wantContains(t, c.fails("edit", map[string]any{"file_path": created, "old_string": "", "new_string": "again"}), "already exists")
	wantContains(t, c.fails("edit", map[string]any{"file_path": e.code + "/nope.txt", "old_string": "a", "new_string": "b"}), "File does not exist")
	wantContains(t, c.fails("edit", map[string]any{"file_path": "f.go", "old_string": "a", "new_string": "b"}), "must be an absolute path")
	wantContains(t, c.fails("edit", map[string]any{"file_path": e.code, "old_string": "a", "new_string": "b"}), "is a directory")
	wantContains(t, c.fails("edit", map[string]any{"file_path": f, "old_string": "a", "new_string": "b", "replace_all": "yes"}), "validating")
}

func TestRelease(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	wantContains(t, c.ok("release", nil), "No sandbox was claimed")
	c.bash("echo mark > /tmp/mark; cd /tmp")
	wantContains(t, c.ok("release", nil), "Released the sandbox")
	if s := e.sessions(); len(s) != 0 {
		t.Fatalf("state left after release: %v", s)
	}
	got := c.bash("pwd; cat /tmp/mark 2>&1 || echo no-mark")
	wantContains(t, got, e.code+"\n", "no-mark")
}

func TestCancelKillsCommand(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	c.bash("true")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 30; touch late"}})
	if err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	// Commands are serialized per session: this one would wait for the
	// sleep if it still ran.
	wantContains(t, c.bash("echo next"), "next")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the cancelled command held the session for %s", d)
	}
	if _, err := os.Stat(filepath.Join(e.code, "late")); err == nil {
		t.Fatal("the cancelled command ran on")
	}
}

func TestProgress(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 6.5; echo done"}}
	params.SetProgressToken("tok-1")
	res, err := c.cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	var msgs []string
	for len(c.progress) > 0 {
		p := <-c.progress
		if p.ProgressToken != "tok-1" {
			t.Fatalf("progress token %v", p.ProgressToken)
		}
		msgs = append(msgs, p.Message)
	}
	all := strings.Join(msgs, "|")
	wantContains(t, all, "claiming a sandbox", "running (2s)")
	if n := strings.Count(all, "running ("); n < 2 {
		t.Fatalf("%d running notifications in 6.5 s, want one every 2 s: %s", n, all)
	}
}

// TestMalformedInput writes raw lines to the server's stdin: each bad one is
// answered with a JSON-RPC error and the server keeps serving.
func TestMalformedInput(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(binary)
	cmd.Dir, cmd.Env = e.code, e.vars
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := &sandboxtest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReader(stdout)
	send := func(line string) map[string]any {
		t.Helper()
		if _, err := stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v\nstderr: %s", line, err, stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(resp), &m); err != nil {
			t.Fatalf("response %q: %v", resp, err)
		}
		return m
	}
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	if m := send("this is not json"); errCode(m) != -32700 {
		t.Fatalf("got %v", m)
	}
	if m := send(`{"jsonrpc":"2.0","id":1,"method":42}`); errCode(m) != -32600 || m["id"] != 1.0 {
		t.Fatalf("got %v", m)
	}
	if m := send(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`); errCode(m) != -32600 {
		t.Fatalf("got %v", m)
	}
	if m := send(`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", 33<<20) + `"}}`); errCode(m) != -32600 {
		t.Fatalf("oversized message: %v", m)
	} else {
		wantContains(t, fmt.Sprint(m["error"]), "the limit is 33554432 bytes")
	}
	m := send(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m["result"] == nil {
		t.Fatalf("initialize after bad input: %v", m)
	}
	stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	if m := send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`); m["error"] == nil {
		t.Fatalf("unknown tool: %v", m)
	} else {
		wantContains(t, fmt.Sprint(m["error"]), "no_such_tool")
	}
	m = send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo alive"}}}`)
	wantContains(t, fmt.Sprint(m["result"]), "alive")
}

// TestEndOfConnection: closing stdin and SIGTERM both release the session.
func TestEndOfConnection(t *testing.T) {
	t.Run("stdin closed", func(t *testing.T) {
		e := newEnv(t)
		c := e.stdio()
		c.bash("true")
		c.cs.Close()
		e.checkReleased()
	})
	t.Run("SIGTERM", func(t *testing.T) {
		e := newEnv(t)
		c := e.stdio()
		c.bash("echo x > sig.txt")
		c.cmd.Process.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
		for !exited(c.cmd.Process.Pid) {
			if time.Now().After(deadline) {
				t.Fatal("no exit after SIGTERM")
			}
			time.Sleep(50 * time.Millisecond)
		}
		e.checkReleased()
		if got := e.read("sig.txt"); got != "x\n" {
			t.Fatalf("got %q", got)
		}
	})
}

func TestNoCodeDir(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(binary)
	cmd.Dir = e.home // the home directory is never a code dir
	cmd.Env = e.vars
	c := &client{t: t, cmd: cmd, stderr: &sandboxtest.Buffer{}}
	cmd.Stderr = c.stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("the server must start anyway: %v", err)
	}
	defer cs.Close()
	c.cs = cs
	wantContains(t, c.fails("bash", map[string]any{"command": "true"}), "holds your home directory", "--code-dir")
}

// exited reports whether a child process has ended (gone, or a zombie not
// yet reaped by its transport).
func exited(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestIdleRelease: a sandbox unused for idle_ttl is released; the next call
// claims a new one and says so.
func TestIdleRelease(t *testing.T) {
	e := newEnv(t)
	c := e.stdio("--idle-ttl", "2s")
	c.bash("cd /tmp && echo kept > /tmp/idle-mark")
	deadline := time.Now().Add(15 * time.Second)
	for len(e.sessions()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not released after idle_ttl: %v", e.sessions())
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := c.bash("pwd; cat /tmp/idle-mark 2>&1 || echo no-mark")
	wantContains(t, got, e.code+"\n", "no-mark", "Note: the previous sandbox was released after 2s without use")
}
