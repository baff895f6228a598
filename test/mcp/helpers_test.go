// Package mcptest drives the real sbx-mcp binary with real MCP clients: the
// go-sdk client over stdio and Streamable HTTP, the MCP Inspector's CLI and
// Claude Code (see install-node-deps.sh), and checks the examples/.
package mcptest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

var (
	binDir string // holds sbx-mcp, for PATH
	binary string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sbxbin")
	if err != nil {
		panic(err)
	}
	binDir = dir
	binary = filepath.Join(dir, "sbx-mcp")
	// SBX_MCP_BUILDFLAGS=-race tests a race-detecting build.
	if err := testenv.Build(binary, "github.com/sbx-sh/sbx/cmd/sbx-mcp", strings.Fields(os.Getenv("SBX_MCP_BUILDFLAGS"))...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's world: a code dir (a git work tree) the server starts
// in, a state dir and a home of its own.
type env struct {
	t     *testing.T
	code  string
	state string
	home  string
	vars  []string
}

func tempDir(t *testing.T, prefix string) string {
	t.Helper()
	// Short paths: the sandbox's unix socket lives under the state dir.
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if real, err := filepath.EvalSymlinks(d); err == nil {
		d = real
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, code: tempDir(t, "sbxcode"), state: tempDir(t, "sbx"), home: tempDir(t, "sbxhome")}
	if err := os.Mkdir(filepath.Join(e.code, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.vars = []string{
		"PATH=" + binDir + ":" + os.Getenv("PATH"),
		"HOME=" + e.home,
		"XDG_STATE_HOME=" + e.state,
		"XDG_CONFIG_HOME=" + filepath.Join(e.home, ".config"),
	}
	t.Cleanup(func() { e.checkReleased() })
	return e
}

// checkReleased fails when a session's state is left behind.
func (e *env) checkReleased() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(e.state, "sbx", "sessions"))
		if len(entries) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, en := range entries {
				names = append(names, en.Name())
			}
			e.t.Errorf("sessions left behind: %v", names)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// marker is a name no other process on the machine has.
func marker(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:])
	return "sbx-mcp-test-" + hex.EncodeToString(b[:])
}

func (e *env) sessions() []string {
	entries, _ := os.ReadDir(filepath.Join(e.state, "sbx", "sessions"))
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

func (e *env) write(rel, content string) string {
	e.t.Helper()
	p := filepath.Join(e.code, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) read(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.code, rel))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// client is a connected MCP client.
type client struct {
	t        *testing.T
	cs       *mcp.ClientSession
	cmd      *exec.Cmd // stdio only
	stderr   *sandboxtest.Buffer
	progress chan *mcp.ProgressNotificationParams
}

func clientOptions(c *client) *mcp.ClientOptions {
	c.progress = make(chan *mcp.ProgressNotificationParams, 100)
	return &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		select {
		case c.progress <- req.Params:
		default:
		}
	}}
}

// checkStderr fails the test when sbx-mcp reported a data race, and shows
// its stderr when the test failed.
func checkStderr(t *testing.T, stderr *sandboxtest.Buffer) {
	if strings.Contains(stderr.String(), "DATA RACE") {
		t.Error("sbx-mcp reported a data race")
	}
	if t.Failed() {
		t.Logf("sbx-mcp stderr:\n%s", stderr)
	}
}

// stdio starts sbx-mcp in the code dir and connects to it.
func (e *env) stdio(args ...string) *client {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = e.code
	cmd.Env = e.vars
	c := &client{t: e.t, cmd: cmd, stderr: &sandboxtest.Buffer{}}
	cmd.Stderr = c.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-test"}, clientOptions(c)).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		e.t.Fatalf("connect over stdio: %v\nstderr:\n%s", err, c.stderr)
	}
	c.cs = cs
	e.t.Cleanup(func() {
		cs.Close()
		checkStderr(e.t, c.stderr)
	})
	return c
}

// server is a running sbx-mcp --http.
type server struct {
	url    string
	token  string
	cmd    *exec.Cmd
	stderr *sandboxtest.Buffer
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

func (e *env) http(token string, args ...string) *server {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"--http", "127.0.0.1:0"}, args...)...)
	cmd.Dir = e.code
	cmd.Env = e.vars
	if token != "" {
		cmd.Env = append(cmd.Env, "SBX_TOKEN="+token)
	}
	s := &server{token: token, cmd: cmd, stderr: &sandboxtest.Buffer{}}
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(s.stderr, pw)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case s.url = <-found:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		e.t.Fatalf("sbx-mcp --http did not say where it listens; stderr:\n%s", s.stderr)
	}
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			e.t.Errorf("sbx-mcp --http did not stop on SIGTERM")
		}
		pw.Close()
		checkStderr(e.t, s.stderr)
	})
	return s
}

// bearer adds a token to every request.
type bearer struct {
	token string
	extra http.Header
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	for k, v := range b.extra {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (s *server) connect(t *testing.T) *client {
	t.Helper()
	c := &client{t: t, stderr: s.stderr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: &http.Client{Transport: &bearer{token: s.token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-test"}, clientOptions(c)).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	return c
}

// with returns the client reporting to t (a subtest).
func (c *client) with(t *testing.T) *client {
	c2 := *c
	c2.t = t
	return &c2
}

// call calls a tool and fails the test on a protocol error.
func (c *client) call(name string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

// ok calls a tool that must succeed and returns its text.
func (c *client) ok(name string, args map[string]any) string {
	c.t.Helper()
	res := c.call(name, args)
	if res.IsError {
		c.t.Fatalf("%s %v failed: %s", name, args, text(res))
	}
	return text(res)
}

// fails calls a tool that must fail and returns its message.
func (c *client) fails(name string, args map[string]any) string {
	c.t.Helper()
	res := c.call(name, args)
	if !res.IsError {
		c.t.Fatalf("%s %v succeeded, want an error: %s", name, args, text(res))
	}
	return text(res)
}

func (c *client) bash(command string) string {
	c.t.Helper()
	return c.ok("bash", map[string]any{"command": command})
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return m
}

func wantContains(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
}
