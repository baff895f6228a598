//go:build e2e

package clustere2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/internal/gittest"
	"github.com/sbx-sh/sbx/internal/testenv"
)

// The engine end to end on the cluster: sbx exec and sbx-mcp, built static
// so that sbx can upload itself into the pod as the sync helper.

var binDir string

func buildStatic(t *testing.T) string {
	t.Helper()
	if binDir != "" {
		return binDir
	}
	dir, err := os.MkdirTemp("", "sbxe2ebin")
	if err != nil {
		t.Fatal(err)
	}
	// As docs/cluster.md says to install them: static, the helper beside sbx.
	for _, pkg := range []string{"sbx", "sbx-mcp", "sbx-inpod"} {
		if err := testenv.BuildStatic(filepath.Join(dir, pkg), "github.com/sbx-sh/sbx/cmd/"+pkg); err != nil {
			t.Fatal(err)
		}
	}
	binDir = dir
	return dir
}

type world struct {
	t         *testing.T
	bin, code string
	env       []string
	state     string // XDG_STATE_HOME
	remote    string // the bare repository behind the HTTP remote
	remoteURL string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, bin: buildStatic(t)}
	home, _ := os.MkdirTemp("", "sbxe2eh")
	state, _ := os.MkdirTemp("", "sbxe2es")
	base, _ := os.MkdirTemp("", "sbxe2ec")
	t.Cleanup(func() { os.RemoveAll(home); os.RemoveAll(state); os.RemoveAll(base) })
	w.code, w.state = filepath.Join(base, "code"), state
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_STATE_HOME=" + state,
		"SBX_BACKEND=cluster", "AGENT_SANDBOX_KUBECONFIG=" + saConfig, "AGENT_SANDBOX_NAMESPACE=" + ns,
		"AGENT_SANDBOX_POOL=" + poolName, "AGENT_SANDBOX_CLAIM_TIMEOUT=120", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com"}
	w.remoteURL, w.remote = gittest.HTTPRemote(t, base, home)
	w.git(base, "init", "-q", "-b", "main", w.code)
	os.WriteFile(filepath.Join(w.code, "README"), []byte("from the host\n"), 0o644)
	w.git(w.code, "add", "README")
	w.git(w.code, "commit", "-qm", "first")
	w.git(w.code, "remote", "add", "origin", w.remoteURL)
	return w
}

func (w *world) git(dir string, args ...string) string {
	w.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, w.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (w *world) sbx(args ...string) (string, string, int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(w.bin, "sbx"), args...)
	cmd.Dir, cmd.Env = w.code, w.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestSbxExecSyncsBothWaysAndRoutesGitPush(t *testing.T) {
	w := newWorld(t)
	out, errs, code := w.sbx("exec", "--keep", "--session", "e2e-cli", "--", "cat README; echo from-the-pod > made.txt; mkdir -p d && echo x > d/y")
	if code != 0 || out != "from the host\n" {
		t.Fatalf("exec: exit %d, out %q, err %q", code, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "made.txt")); string(b) != "from-the-pod\n" {
		t.Fatalf("the pod's change did not come back: %q (%s)", b, errs)
	}
	os.WriteFile(filepath.Join(w.code, "README"), []byte("edited on the host\n"), 0o644)
	out, errs, code = w.sbx("exec", "--session", "e2e-cli", "--", "cat README; ls d; rm made.txt")
	if code != 0 || out != "edited on the host\ny\n" {
		t.Fatalf("second exec: exit %d, out %q, err %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(w.code, "made.txt")); err == nil {
		t.Fatal("a deletion in the pod did not come back")
	}
	// git push runs on the host, where the credentials are.
	w.git(w.code, "commit", "-qam", "second")
	out, errs, code = w.sbx("exec", "--session", "e2e-cli", "--", "git", "push", "-q", "origin", "HEAD:refs/heads/main")
	if code != 0 {
		t.Fatalf("git push: exit %d, %q %q", code, out, errs)
	}
	if log, err := exec.Command("git", "--git-dir", w.remote, "log", "--oneline", "main").CombinedOutput(); err != nil || !strings.Contains(string(log), "second") {
		t.Fatalf("push did not reach the remote: %v %s", err, log)
	}
	// From the second process on, the session's processes share one exec
	// of the helper through a relay, which goes away with the session.
	relays, _ := filepath.Glob(filepath.Join(w.state, "sbx", "sessions", "e2e-cli", "relay-*.sock"))
	if len(relays) != 1 {
		b, _ := os.ReadFile(filepath.Join(w.state, "sbx", "sessions", "e2e-cli", "relay.log"))
		t.Fatalf("relay sockets: %v\n%s", relays, b)
	}
	// The claim is found by label, listed, and released.
	out, errs, code = w.sbx("ls", "--backend", "cluster")
	if code != 0 || !strings.Contains(out, "e2e-cli") {
		t.Fatalf("ls --backend cluster: %d %q %q", code, out, errs)
	}
	if out, errs, code = w.sbx("release", "--session", "e2e-cli"); code != 0 {
		t.Fatalf("release: %d %q %q", code, out, errs)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, _ = w.sbx("ls", "--backend", "cluster")
		if !strings.Contains(out, "e2e-cli") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim still listed after release:\n%s", out)
		}
		time.Sleep(time.Second)
	}
	for deadline = time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(relays[0]); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay outlived the released session")
		}
	}
}

func TestSbxMCPOnTheCluster(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.Command(filepath.Join(w.bin, "sbx-mcp"))
	cmd.Dir, cmd.Env = w.code, w.env
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "cat README && echo via-mcp > mcp.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %+v", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "from the host") {
		t.Fatalf("bash output: %q", text)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "mcp.txt")); string(b) != "via-mcp\n" {
		t.Fatalf("the tool's change is not on the host: %q", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": filepath.Join(w.code, "mcp.txt")}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "via-mcp") {
		t.Fatalf("read: %v %+v", err, res)
	}
	cs.Close()
	// The session's claim goes with the connection.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, _ := w.sbx("ls", "--backend", "cluster")
		if !strings.Contains(out, "mcp-") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim still listed after the MCP client left:\n%s", out)
		}
		time.Sleep(time.Second)
	}
}

// TestSbxMCPPersistentReattach restarts sbx-mcp twice on a persistent
// session: after a clean exit and after a kill -9. Each new server finds the
// claim by its label and runs in the same pod (a file outside the code dir,
// which no sync carries, is still there).
func TestSbxMCPPersistentReattach(t *testing.T) {
	w := newWorld(t)
	w.env = append(w.env, "AGENT_SANDBOX_PERSISTENT=true")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := func() (*mcp.ClientSession, *exec.Cmd) {
		cmd := exec.Command(filepath.Join(w.bin, "sbx-mcp"), "--session", "e2e-persist")
		cmd.Dir, cmd.Env = w.code, w.env
		cmd.Stderr = os.Stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs, cmd
	}
	bash := func(cs *mcp.ClientSession, command string) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
		if err != nil || res.IsError {
			t.Fatalf("bash %q: %v %+v", command, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	cs, _ := start()
	bash(cs, "hostname > /tmp/first-pod")
	pod := strings.TrimSpace(bash(cs, "cat /tmp/first-pod"))
	cs.Close() // a clean exit keeps a persistent session

	cs, cmd := start()
	if out := bash(cs, "cat /tmp/first-pod; echo again >> /tmp/first-pod"); !strings.Contains(out, pod) {
		t.Fatalf("after a restart: %q, want the pod %s's file", out, pod)
	}
	cmd.Process.Kill() // and so does a crash
	cmd.Wait()
	cs.Close()

	cs, _ = start()
	if out := bash(cs, "cat /tmp/first-pod"); !strings.Contains(out, "again") {
		t.Fatalf("after a kill -9: %q", out)
	}
	cs.Close()
	if out, errs, code := w.sbx("release", "--backend", "cluster", "--session", "e2e-persist"); code != 0 {
		t.Fatalf("release: %d %q %q", code, out, errs)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		out, _, _ := w.sbx("ls", "--backend", "cluster")
		if !strings.Contains(out, "e2e-persist") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim still listed after release:\n%s", out)
		}
	}
}
