package mcptest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testToken = "test-token-0123456789abcdef"

func TestHTTPTools(t *testing.T) {
	e := newEnv(t)
	e.write("doc.txt", "one\ntwo\n")
	s := e.http(testToken)
	c := s.connect(t)
	wantContains(t, c.bash("echo over http; pwd"), "over http\n"+e.code+"\n", "Exit code: 0")
	wantContains(t, c.ok("read", map[string]any{"file_path": e.code + "/doc.txt"}), "     1\tone\n     2\ttwo")
	c.ok("write", map[string]any{"file_path": e.code + "/w.txt", "content": "w\n"})
	c.ok("edit", map[string]any{"file_path": e.code + "/w.txt", "old_string": "w", "new_string": "W"})
	if got := e.read("w.txt"); got != "W\n" {
		t.Fatalf("host has %q", got)
	}
	res := c.call("bash", map[string]any{"command": "echo bg", "run_in_background": true})
	id := structured(t, res)["id"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.call("bash_output", map[string]any{"id": id})
		if structured(t, r)["status"] == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background job did not end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantContains(t, c.fails("bash_kill", map[string]any{"id": "bash_42"}), "no background job")
	wantContains(t, c.ok("release", nil), "Released")

	// Progress and cancellation over HTTP too.
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 3.5"}}
	params.SetProgressToken(7)
	if _, err := c.cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	if len(c.progress) == 0 {
		t.Fatal("no progress notifications over HTTP")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 30"}})
	wantContains(t, c.bash("echo after-cancel"), "after-cancel")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the cancelled command held the session for %s", d)
	}

	// Bad calls are answered, and the server keeps serving.
	if _, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Fatalf("unknown tool: %v", err)
	}
	wantContains(t, c.fails("bash", map[string]any{"command": []string{"ls"}}), "validating")
	wantContains(t, c.fails("write", map[string]any{"file_path": e.code + "/big", "content": strings.Repeat("x", 17<<20)}), "over the limit")
	c.bash("true")
}

// TestHTTPIsolation: two clients of one server never share a sandbox.
func TestHTTPIsolation(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	a, b := s.connect(t), s.connect(t)
	a.bash("echo secret > /tmp/a-only; cd /tmp")
	wantContains(t, b.bash("cat /tmp/a-only 2>&1; pwd"), "No such file", e.code+"\n")
	wantContains(t, a.bash("pwd; cat /tmp/a-only"), "/tmp\nsecret")
	if got := e.sessions(); len(got) != 2 {
		t.Fatalf("sessions %v, want two", got)
	}
	// A client that ends its MCP session (DELETE) releases its sandbox.
	b.cs.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.sessions()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("sessions after one client left: %v", e.sessions())
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.bash("true")
}

// TestHTTPRefusals: no token, a wrong one, a foreign Origin or Host, bad
// bodies: each refused with a clear message, and the server keeps serving.
func TestHTTPRefusals(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	host := strings.TrimPrefix(strings.TrimSuffix(s.url, "/mcp"), "http://")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	post := func(body string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	auth := "Bearer " + testToken
	for _, tt := range []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		want   string
	}{
		{"no token", init, nil, 401, "missing bearer token"},
		{"wrong token", init, map[string]string{"Authorization": "Bearer nope"}, 401, "wrong bearer token"},
		{"basic auth", init, map[string]string{"Authorization": "Basic eDp5"}, 401, "missing bearer token"},
		{"foreign origin", init, map[string]string{"Authorization": auth, "Origin": "https://evil.example"}, 403, "Origin \"https://evil.example\" is not this server"},
		{"null origin", init, map[string]string{"Authorization": auth, "Origin": "null"}, 403, "is not this server"},
		{"rebound host", init, map[string]string{"Authorization": auth, "Host": "evil.example:" + strings.Split(host, ":")[1]}, 403, "DNS rebinding"},
		{"wrong port", init, map[string]string{"Authorization": auth, "Host": "127.0.0.1:1"}, 403, "DNS rebinding"},
		{"malformed json", `{"jsonrpc":`, map[string]string{"Authorization": auth}, 400, ""},
		{"oversized body", `{"x":"` + strings.Repeat("a", 21<<20) + `"}`, map[string]string{"Authorization": auth}, 413, ""},
		{"same origin", init, map[string]string{"Authorization": auth, "Origin": "http://" + host}, 200, "protocolVersion"},
	} {
		status, body := post(tt.body, tt.hdr)
		if status != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %q, want %d with %q", tt.name, status, body, tt.status, tt.want)
		}
	}
	c := s.connect(t)
	c.bash("true")
}

func TestHTTPToken(t *testing.T) {
	e := newEnv(t)
	t.Run("generated and printed", func(t *testing.T) {
		s := e.http("")
		line := ""
		sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
		for sc.Scan() {
			if tok, ok := strings.CutPrefix(sc.Text(), "sbx-mcp: token: "); ok {
				line = tok
			}
		}
		if len(line) != 64 {
			t.Fatalf("no generated token on stderr:\n%s", s.stderr)
		}
		s.token = line
		s.connect(t).bash("true")
	})
	t.Run("from a file", func(t *testing.T) {
		f := filepath.Join(e.home, "tok")
		if err := os.WriteFile(f, []byte("file-token-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := e.http("", "--token-file", f)
		if strings.Contains(s.stderr.String(), "token:") {
			t.Fatal("a given token must not be printed")
		}
		s.token = "file-token-0123456789"
		s.connect(t).bash("true")
	})
	t.Run("non-loopback needs a given token", func(t *testing.T) {
		cmd := exec.Command(binary, "--http", "0.0.0.0:0")
		cmd.Dir, cmd.Env = e.code, e.vars
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not a loopback address, without a token given explicitly") {
			t.Fatalf("%v: %s", err, out)
		}
	})
	t.Run("short token refused", func(t *testing.T) {
		cmd := exec.Command(binary, "--http", "127.0.0.1:0")
		cmd.Dir, cmd.Env = e.code, append(e.vars, "SBX_TOKEN=short")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "at least 16") {
			t.Fatalf("%v: %s", err, out)
		}
	})
}

func TestVersionAndUsage(t *testing.T) {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "sbx-mcp ") {
		t.Fatalf("%v %q", err, out)
	}
	out, err = exec.Command(binary, "extra").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unexpected argument "extra"`) {
		t.Fatalf("%v %q", err, out)
	}
	out, err = exec.Command(binary, "--idle-ttl", "soon").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--idle-ttl") {
		t.Fatalf("%v %q", err, out)
	}
}
