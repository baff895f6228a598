package mcptest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-sh/sbx/internal/testenv"
)

var (
	sbxOnce sync.Once
	sbxErr  error
)

// sbxBinary builds the sbx command beside sbx-mcp.
func sbxBinary(t *testing.T) string {
	t.Helper()
	sbxOnce.Do(func() {
		sbxErr = testenv.Build(filepath.Join(binDir, "sbx"), "github.com/sbx-sh/sbx/cmd/sbx")
	})
	if sbxErr != nil {
		t.Fatal(sbxErr)
	}
	return filepath.Join(binDir, "sbx")
}

// codexBinary finds the Codex CLI that install-node-deps.sh installed.
func codexBinary(t *testing.T) string {
	t.Helper()
	node, _, _ := nodeDeps(t)
	prefix := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(node))))
	p := filepath.Join(prefix, "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: install the Codex CLI with `test/mcp/install-node-deps.sh`", p)
	}
	return p
}

// setupWorld is a home and project with claude and codex on PATH, and
// sbx-mcp there or not.
type setupWorld struct {
	t          *testing.T
	home, proj string
	bin        string // claude, codex, sbx and maybe sbx-mcp
	vars       []string
}

func newSetupWorld(t *testing.T, withSbxMCP bool) *setupWorld {
	_, _, claude := nodeDeps(t)
	codex := codexBinary(t)
	sbx := sbxBinary(t)
	w := &setupWorld{t: t, home: tempDir(t, "sbxsetuphome"), proj: tempDir(t, "sbxsetupproj")}
	// The clients start sbx-mcp with their own environment (its state under
	// HOME/.local/state) and may kill it without its release: what its
	// sessions left running ends with the test.
	t.Cleanup(func() {
		if left := testenv.EndSandboxes(w.home); len(left) > 0 {
			t.Logf("ended what the clients' sbx-mcp left running: %s", strings.Join(left, "; "))
		}
	})
	if out, err := exec.Command("git", "init", "-q", w.proj).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	bin := tempDir(t, "sbxsetupbin")
	w.bin = bin
	links := map[string]string{"claude": claude, "codex": codex, "sbx": sbx}
	if withSbxMCP {
		links["sbx-mcp"] = binary
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	w.vars = []string{
		"PATH=" + bin + ":/usr/bin:/bin",
		"HOME=" + w.home,
		"XDG_STATE_HOME=" + filepath.Join(w.home, ".state"),
		"XDG_CONFIG_HOME=" + filepath.Join(w.home, ".config"),
	}
	return w
}

func (w *setupWorld) sbx(args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "sbx"), args...)
	cmd.Dir, cmd.Env = w.proj, w.vars
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return string(out), code
}

func (w *setupWorld) run(name string, args ...string) string {
	w.t.Helper()
	cmd := exec.Command(filepath.Join(w.bin, name), args...)
	cmd.Dir, cmd.Env = w.proj, w.vars
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func readOrMissing(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// TestSetupClaudeCode: sbx setup claude-code with the real Claude Code
// CLI: registers sbx (claude mcp list: Connected), denies the built-in
// tools while keeping the user's other settings, a second run changes
// nothing, --undo restores settings.json byte for byte and removes the
// registration.
func TestSetupClaudeCode(t *testing.T) {
	w := newSetupWorld(t, true)
	settings := filepath.Join(w.proj, ".claude", "settings.json")
	before := "{\n  \"model\": \"opus\",\n  \"permissions\": {\n    \"deny\": [\"WebFetch\"]\n  }\n}"
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := w.sbx("setup", "claude-code")
	if code != 0 || !strings.Contains(out, "verified: claude mcp list shows sbx Connected") {
		t.Fatalf("setup: exit %d\n%s", code, out)
	}
	var got struct {
		Model       string `json:"model"`
		Permissions struct {
			Deny                         []string `json:"deny"`
			Allow                        []string `json:"allow"`
			DisableBypassPermissionsMode string   `json:"disableBypassPermissionsMode"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(readOrMissing(settings)), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"WebFetch", "Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep"}
	if got.Model != "opus" || strings.Join(got.Permissions.Deny, ",") != strings.Join(want, ",") ||
		strings.Join(got.Permissions.Allow, ",") != "mcp__sbx" || got.Permissions.DisableBypassPermissionsMode != "disable" {
		t.Fatalf("settings.json after setup:\n%s", readOrMissing(settings))
	}
	if list := w.run("claude", "mcp", "list"); !strings.Contains(list, "sbx: sbx-mcp") || !strings.Contains(list, "Connected") {
		t.Fatalf("claude mcp list:\n%s", list)
	}
	after := readOrMissing(settings)
	out, code = w.sbx("setup", "claude-code")
	if code != 0 || !strings.Contains(out, "unchanged:") || strings.Contains("\n"+out, "\nchanged: ") || readOrMissing(settings) != after {
		t.Fatalf("second setup: exit %d\n%s", code, out)
	}
	out, code = w.sbx("setup", "claude-code", "--undo")
	if code != 0 {
		t.Fatalf("undo: exit %d\n%s", code, out)
	}
	if readOrMissing(settings) != before {
		t.Fatalf("settings.json after undo:\n%s\nwant\n%s", readOrMissing(settings), before)
	}
	if get := w.run("claude", "mcp", "get", "sbx"); !strings.Contains(get, `No MCP server named "sbx"`) {
		t.Fatalf("sbx still registered after undo:\n%s", get)
	}
}

// TestSetupFailsClosed: without sbx-mcp on PATH setup changes nothing and
// exits non-zero saying what to do; a settings file sbx cannot edit is
// refused the same way.
func TestSetupFailsClosed(t *testing.T) {
	w := newSetupWorld(t, false)
	for _, client := range []string{"claude-code", "codex"} {
		out, code := w.sbx("setup", client)
		if code == 0 || !strings.Contains(out, "sbx-mcp is not on PATH") || !strings.Contains(out, "go env GOPATH") {
			t.Fatalf("%s without sbx-mcp: exit %d\n%s", client, code, out)
		}
	}
	if p := filepath.Join(w.proj, ".claude"); readOrMissing(filepath.Join(p, "settings.json")) != "<missing>" {
		t.Fatal("settings.json written although setup failed")
	}
	if readOrMissing(filepath.Join(w.home, ".codex", "config.toml")) != "<missing>" {
		t.Fatal("config.toml written although setup failed")
	}
	w = newSetupWorld(t, true)
	cfg := filepath.Join(w.home, ".codex", "config.toml")
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	bad := "features = { shell_tool = true }\n"
	os.WriteFile(cfg, []byte(bad), 0o644)
	out, code := w.sbx("setup", "codex")
	if code == 0 || !strings.Contains(out, "set these by hand") || readOrMissing(cfg) != bad {
		t.Fatalf("setup codex on an inline features table: exit %d\n%s", code, out)
	}
}

// TestSetupCodex: sbx setup codex on the old example config, checked with the
// real Codex CLI: prompt-input lists mcp__sbx and no shell or image tool of
// Codex's own; idempotent; --undo restores the file byte for byte.
// Then the attack: a model (a local stand-in for the Responses API) makes
// Codex call its own apply_patch to create a host file. Before setup the
// file appears; after setup Codex refuses and the host is untouched.
func TestSetupCodex(t *testing.T) {
	w := newSetupWorld(t, true)
	// The example config before issue 11: Codex's shell off, sbx registered.
	example := []byte("[features]\nshell_tool = false\n\n[mcp_servers.sbx]\ncommand = \"sbx-mcp\"\nargs = [\"--idle-ttl\", \"2h\"]\nstartup_timeout_sec = 20\ntool_timeout_sec = 660\n")
	cfg := filepath.Join(w.home, ".codex", "config.toml")
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	if err := os.WriteFile(cfg, example, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(w.proj, "written-by-codex.txt")
	if w.codexApplyPatch(target); readOrMissing(target) == "<missing>" {
		t.Fatal("the attack did not write the host before setup: the test would prove nothing")
	}
	os.Remove(target)

	out, code := w.sbx("setup", "codex")
	if code != 0 || !strings.Contains(out, "verified: codex debug prompt-input lists mcp__sbx") {
		t.Fatalf("setup codex: exit %d\n%s", code, out)
	}
	prompt := w.run("codex", "debug", "prompt-input", "hi")
	if !strings.Contains(prompt, "mcp__sbx") || strings.Contains(prompt, "### `view_image`") || strings.Contains(prompt, `"name": "exec_command"`) {
		t.Fatalf("prompt-input after setup:\n%.3000s", prompt)
	}
	after := readOrMissing(cfg)
	reply := w.codexApplyPatch(target)
	if readOrMissing(target) != "<missing>" {
		t.Fatal("Codex's apply_patch wrote the host after sbx setup codex")
	}
	if !strings.Contains(reply, "read-only sandbox") {
		t.Fatalf("Codex's answer to apply_patch: %s", reply)
	}
	out, code = w.sbx("setup", "codex")
	if code != 0 || !strings.Contains(out, "unchanged:") || readOrMissing(cfg) != after {
		t.Fatalf("second setup codex: exit %d\n%s", code, out)
	}
	out, code = w.sbx("setup", "codex", "--undo")
	if code != 0 || readOrMissing(cfg) != string(example) {
		t.Fatalf("undo: exit %d\n%s\nconfig now:\n%s", code, out, readOrMissing(cfg))
	}
	// The example as it is now needs no change and passes the check.
	current, err := os.ReadFile("../../examples/codex/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cfg, current, 0o644)
	out, code = w.sbx("setup", "codex")
	if code != 0 || !strings.Contains(out, "unchanged:") || readOrMissing(cfg) != string(current) {
		t.Fatalf("setup codex on examples/codex/config.toml: exit %d\n%s", code, out)
	}
	w.sbx("setup", "codex", "--undo")
}

// codexApplyPatch runs `codex exec` against a local Responses API that
// answers with an apply_patch call creating target, as the sandbox Codex
// uses in a trusted project (workspace-write) unless config says otherwise.
// It returns what Codex sent back as the tool's output.
func (w *setupWorld) codexApplyPatch(target string) string {
	w.t.Helper()
	patch := "*** Begin Patch\n*** Add File: " + target + "\n+host written\n*** End Patch\n"
	var flags []string
	if !strings.Contains(readOrMissing(filepath.Join(w.home, ".codex", "config.toml")), "sandbox_mode") {
		flags = []string{"-s", "workspace-write"}
	}
	return w.codexCall(map[string]any{"type": "custom_tool_call", "id": "c", "call_id": "call_1", "name": "apply_patch", "input": patch, "status": "completed"},
		"custom_tool_call_output", flags...)
}
