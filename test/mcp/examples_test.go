package mcptest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// serverEntry is an MCP server as the clients' config files describe one.
type serverEntry struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
}

// start launches an example's server entry from dir, as its client would,
// and checks that bash runs in the expected code dir.
func (e *env) start(t *testing.T, s serverEntry, dir string) {
	t.Helper()
	if s.Command != "sbx-mcp" {
		t.Fatalf("command %q, want sbx-mcp", s.Command)
	}
	// The command is looked up in the client's PATH, which holds the binary
	// under test.
	cmd := exec.Command(binary, s.Args...)
	cmd.Args[0] = s.Command
	cmd.Dir = dir
	cmd.Env = e.vars
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	c := &client{t: t, stderr: &sandboxtest.Buffer{}}
	cmd.Stderr = c.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start %v: %v\n%s", s, err, c.stderr)
	}
	defer cs.Close()
	c.cs = cs
	wantContains(t, c.bash("pwd"), e.code+"\n")
}

func TestExampleClaudeSettings(t *testing.T) {
	raw, err := os.ReadFile("../../examples/claude-code/.claude/settings.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Permissions struct {
			Allow                        []string `json:"allow"`
			Deny                         []string `json:"deny"`
			DisableBypassPermissionsMode string   `json:"disableBypassPermissionsMode"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep", "NotebookEdit"} {
		if !slices.Contains(s.Permissions.Deny, tool) {
			t.Errorf("built-in %s is not denied", tool)
		}
	}
	if !slices.Contains(s.Permissions.Allow, "mcp__sbx") {
		t.Error("the sbx tools are not allowed")
	}
	if s.Permissions.DisableBypassPermissionsMode != "disable" {
		t.Error("bypassPermissions, which ignores deny rules, is not disabled")
	}
	readme, _ := os.ReadFile("../../examples/claude-code/README.md")
	wantContains(t, string(readme), "claude mcp add sbx -- sbx-mcp\n", "bypassPermissions")
}

func TestExampleCodex(t *testing.T) {
	var cfg struct {
		SandboxMode    string `toml:"sandbox_mode"`
		ApprovalPolicy string `toml:"approval_policy"`
		Features       struct {
			ShellTool *bool `toml:"shell_tool"`
			ViewImage *bool `toml:"view_image"`
		} `toml:"features"`
		MCPServers map[string]struct {
			serverEntry
			StartupTimeoutSec        int    `toml:"startup_timeout_sec"`
			ToolTimeoutSec           int    `toml:"tool_timeout_sec"`
			DefaultToolsApprovalMode string `toml:"default_tools_approval_mode"`
		} `toml:"mcp_servers"`
	}
	md, err := toml.DecodeFile("../../examples/codex/config.toml", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		t.Fatalf("keys the test does not know: %v", un)
	}
	if cfg.Features.ShellTool == nil || *cfg.Features.ShellTool {
		t.Fatal("[features] shell_tool is not false")
	}
	if cfg.Features.ViewImage == nil || *cfg.Features.ViewImage {
		t.Fatal("[features] view_image (reads host files) is not false")
	}
	// Codex's apply_patch cannot be removed; this pair makes Codex refuse
	// its writes (TestSetupCodex drives it).
	if cfg.SandboxMode != "read-only" || cfg.ApprovalPolicy != "never" {
		t.Fatalf("sandbox_mode %q, approval_policy %q: want read-only and never", cfg.SandboxMode, cfg.ApprovalPolicy)
	}
	sbx, ok := cfg.MCPServers["sbx"]
	if !ok {
		t.Fatal("no [mcp_servers.sbx]")
	}
	if sbx.DefaultToolsApprovalMode != "approve" {
		t.Fatal(`mcp_servers.sbx.default_tools_approval_mode is not "approve": approval "never" refuses sbx's tools`)
	}
	if sbx.StartupTimeoutSec < 10 || sbx.ToolTimeoutSec < 600 {
		t.Fatalf("timeouts %d s to start, %d s per tool: want >= 10 and >= 600 (bash allows 600 s)", sbx.StartupTimeoutSec, sbx.ToolTimeoutSec)
	}
	e := newEnv(t)
	e.start(t, sbx.serverEntry, e.code)
}

func TestExampleCursor(t *testing.T) {
	// Cursor may start servers anywhere: the flag decides.
	startExample(t, "../../examples/cursor/.cursor/mcp.json", "${workspaceFolder}")
}

func TestExampleWindsurf(t *testing.T) {
	startExample(t, "../../examples/windsurf/mcp_config.json", "/absolute/path/to/your/project")
}

// startExample starts the "sbx" server of an mcpServers JSON config, with
// placeholder in its arguments replaced by the test's code dir, from /.
func startExample(t *testing.T, path, placeholder string) {
	var cfg struct {
		MCPServers map[string]serverEntry `json:"mcpServers"`
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	s := cfg.MCPServers["sbx"]
	for i, a := range s.Args {
		s.Args[i] = strings.ReplaceAll(a, placeholder, e.code)
	}
	e.start(t, s, "/")
}
