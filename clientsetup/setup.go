package clientsetup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sbx-sh/sbx/internal/regfile"
)

// Clients are the names `sbx setup` takes.
var Clients = []string{"claude-code", "codex", "cursor", "windsurf"}

// ErrCheck: a check of the result failed; the message says what and what to
// do. The command exits non-zero.
var ErrCheck = errors.New("check failed")

// Options says what to set up. Dir, Home and StateDir are absolute.
type Options struct {
	Client   string
	Global   bool // the user-level files instead of the project's
	Undo     bool
	Dir      string // the project (where the client is started)
	Home     string
	StateDir string // sbx's state directory: backups go in StateDir/setup
	Stdout   io.Writer
	Env      []string // for the client commands; nil means this process's
}

// Run sets the client up (or undoes it), prints each change, and checks the
// result with the client itself.
func Run(ctx context.Context, o Options) error {
	scope := o.Dir
	if o.Global || o.Client == "codex" || o.Client == "windsurf" {
		scope = "global"
	}
	recPath := recordPath(o.StateDir, o.Client, scope)
	if o.Undo {
		return undo(ctx, o, recPath)
	}
	if _, err := o.lookPath("sbx-mcp"); err != nil {
		return fmt.Errorf("%w: sbx-mcp is not on PATH, so %s could not start it: run `go install github.com/sbx-sh/sbx/cmd/...@latest` and put $(go env GOPATH)/bin on PATH (then `sbx doctor`)", ErrCheck, o.Client)
	}
	rec, err := loadRecord(recPath)
	if err != nil {
		return err
	}
	if rec == nil {
		rec = &record{Client: o.Client, Scope: scope}
	}
	var changes []string
	switch o.Client {
	case "claude-code":
		changes, err = setupClaude(ctx, o, rec)
	case "codex":
		changes, err = setupCodex(o, rec)
	case "cursor":
		changes, err = setupCursor(o, rec)
	case "windsurf":
		changes, err = setupWindsurf(o, rec)
	default:
		return fmt.Errorf("unknown client %q: want one of %s", o.Client, strings.Join(Clients, ", "))
	}
	if len(rec.Files) > 0 || rec.Registered != "" {
		if serr := rec.save(recPath); serr != nil && err == nil {
			err = serr
		}
	}
	for _, c := range changes {
		fmt.Fprintf(o.Stdout, "changed: %s\n", c)
	}
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		fmt.Fprintf(o.Stdout, "unchanged: %s was already set up for sbx\n", o.Client)
	}
	if err := verify(ctx, o); err != nil {
		return err
	}
	if len(changes) > 0 {
		fmt.Fprintf(o.Stdout, "undo with: sbx setup %s%s --undo\n", o.Client, map[bool]string{true: " --global"}[o.Global])
	}
	return nil
}

func undo(ctx context.Context, o Options, recPath string) error {
	rec, err := loadRecord(recPath)
	if err != nil {
		return err
	}
	if rec == nil {
		fmt.Fprintf(o.Stdout, "unchanged: sbx setup %s made no change here to undo\n", o.Client)
		return nil
	}
	var errs []error
	if rec.Registered != "" {
		if out, err := o.run(ctx, "claude", "mcp", "remove", "--scope", rec.Registered, "sbx"); err != nil {
			errs = append(errs, fmt.Errorf("claude mcp remove --scope %s sbx: %v: %s", rec.Registered, err, out))
		} else {
			fmt.Fprintf(o.Stdout, "restored: sbx removed from Claude Code's %s MCP servers\n", rec.Registered)
			rec.Registered = ""
		}
	}
	restored, err := rec.restore()
	for _, p := range restored {
		fmt.Fprintf(o.Stdout, "restored: %s\n", p)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.Remove(recPath)
}

func (o Options) env() []string {
	if o.Env != nil {
		return o.Env
	}
	return os.Environ()
}

// lookPath resolves name on the PATH the client will see.
func (o Options) lookPath(name string) (string, error) {
	path := ""
	for _, kv := range o.env() {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[len("PATH="):]
		}
	}
	for _, d := range filepath.SplitList(path) {
		// A relative entry ("", ".", "bin", "node_modules/.bin") names a
		// directory of the project sbx setup runs in: a program there is
		// the repository's, never run on its word (as os/exec refuses
		// what LookPath finds through ".").
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on PATH", name)
}

// run runs a client command in the project directory, bounded in time.
func (o Options) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	bin, err := o.lookPath(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = o.Dir, o.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.Bytes(), err
}

// editJSON applies edit to the JSON file at path (a missing file is an
// empty object) and writes it only when edit changed something.
func editJSON(rec *record, path string, edit func(root *node) ([]string, error)) ([]string, error) {
	path, err := place(projectOf(rec.Scope), path)
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	root, err := parseJSON(old)
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON sbx can edit (%v): fix it, then run sbx setup again", path, err)
	}
	if root.kind != 'o' {
		return nil, fmt.Errorf("%s does not hold a JSON object: fix it, then run sbx setup again", path)
	}
	changes, err := edit(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: fix it, then run sbx setup again", path, err)
	}
	if len(changes) == 0 {
		return nil, nil
	}
	if err := rec.writeFile(path, root.encode()); err != nil {
		return nil, err
	}
	for i, c := range changes {
		changes[i] = path + ": " + c
	}
	return changes, nil
}

// claudeDenied are Claude Code's own tools that reach the host's files or
// shell. The model keeps mcp__sbx__*, which run in the sandbox.
var claudeDenied = []string{"Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep"}

func setupClaude(ctx context.Context, o Options, rec *record) ([]string, error) {
	if _, err := o.lookPath("claude"); err != nil {
		return nil, fmt.Errorf("%w: claude is not on PATH: install Claude Code (npm install -g @anthropic-ai/claude-code), then run sbx setup claude-code again", ErrCheck)
	}
	if err := checkProjectServer(o.Dir); err != nil {
		return nil, err
	}
	settings := filepath.Join(o.Dir, ".claude", "settings.json")
	scope := "local"
	if o.Global {
		settings, scope = filepath.Join(o.Home, ".claude", "settings.json"), "user"
	}
	changes, err := editJSON(rec, settings, func(root *node) ([]string, error) {
		perms, err := root.object("permissions", "settings")
		if err != nil {
			return nil, err
		}
		var ch []string
		added, err := perms.addStrings("deny", "permissions", claudeDenied...)
		if err != nil {
			return nil, err
		}
		if len(added) > 0 {
			ch = append(ch, "permissions.deny += "+strings.Join(added, ", "))
		}
		added, err = perms.addStrings("allow", "permissions", "mcp__sbx")
		if err != nil {
			return nil, err
		}
		if len(added) > 0 {
			ch = append(ch, "permissions.allow += mcp__sbx")
		}
		// bypassPermissions mode skips deny rules too: refuse that mode.
		if s, _ := perms.get("disableBypassPermissionsMode").text(); s != "disable" {
			perms.set("disableBypassPermissionsMode", str("disable"))
			ch = append(ch, `permissions.disableBypassPermissionsMode = "disable"`)
		}
		return ch, nil
	})
	if err != nil {
		return nil, err
	}
	// Registered already in a scope of the user's: keep the user's entry.
	// The project's scope (.mcp.json, plainly sbx-mcp after
	// checkProjectServer) is not the user's: a local entry of sbx's own
	// comes before it.
	if out, err := o.run(ctx, "claude", "mcp", "get", "sbx"); err == nil && !projectScoped(out) {
		return changes, nil
	}
	if out, err := o.run(ctx, "claude", "mcp", "add", "--scope", scope, "sbx", "--", "sbx-mcp"); err != nil {
		return changes, fmt.Errorf("claude mcp add --scope %s sbx -- sbx-mcp: %v: %s", scope, err, strings.TrimSpace(string(out)))
	}
	rec.Registered = scope
	return append(changes, fmt.Sprintf("claude mcp add --scope %s sbx -- sbx-mcp", scope)), nil
}

// codexHome is where Codex keeps its config: $CODEX_HOME, else ~/.codex.
func codexHome(o Options) string {
	for _, kv := range o.env() {
		if v, ok := strings.CutPrefix(kv, "CODEX_HOME="); ok && v != "" {
			return v
		}
	}
	return filepath.Join(o.Home, ".codex")
}

// codexSettings: Codex's own shell off; its image viewer (reads host files)
// off; and, because no setting removes apply_patch, Codex's sandbox
// read-only with approvals never asked, so that apply_patch is refused
// instead of writing the host. sbx's tools run without a prompt (approval
// "never" would otherwise refuse every MCP call).
var codexSettings = []tomlSetting{
	{"", "sandbox_mode", `"read-only"`, "read-only"},
	{"", "approval_policy", `"never"`, "never"},
	{"features", "shell_tool", "false", false},
	{"features", "view_image", "false", false},
	{"mcp_servers.sbx", "default_tools_approval_mode", `"approve"`, "approve"},
}

func setupCodex(o Options, rec *record) ([]string, error) {
	if _, err := o.lookPath("codex"); err != nil {
		return nil, fmt.Errorf("%w: codex is not on PATH: install the Codex CLI (npm install -g @openai/codex), then run sbx setup codex again", ErrCheck)
	}
	path, err := place(projectOf(rec.Scope), filepath.Join(codexHome(o), "config.toml"))
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	settings := codexSettings
	var cur map[string]any
	if err := decodeTOML(old, &cur); err == nil {
		if _, ok := lookup(cur, "mcp_servers", "sbx"); !ok {
			settings = append(append([]tomlSetting{}, settings...),
				tomlSetting{"mcp_servers.sbx", "command", `"sbx-mcp"`, "sbx-mcp"},
				tomlSetting{"mcp_servers.sbx", "startup_timeout_sec", "20", int64(20)},
				tomlSetting{"mcp_servers.sbx", "tool_timeout_sec", "660", int64(660)})
		}
	}
	data, changed, err := editTOML(old, settings)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: set these by hand: %s", path, err, describeTOML(settings))
	}
	if len(changed) == 0 {
		return nil, nil
	}
	if err := rec.writeFile(path, data); err != nil {
		return nil, err
	}
	return []string{path + ": " + describeTOML(changed) + " (Codex's config is user-level: this applies to every project)"}, nil
}

func describeTOML(s []tomlSetting) string {
	var parts []string
	for _, x := range s {
		k := x.key
		if x.table != "" {
			k = x.table + "." + k
		}
		parts = append(parts, k+" = "+x.value)
	}
	return strings.Join(parts, ", ")
}

func setupCursor(o Options, rec *record) ([]string, error) {
	base := filepath.Join(o.Dir, ".cursor")
	cli := filepath.Join(base, "cli.json")
	if o.Global {
		base = filepath.Join(o.Home, ".cursor")
		cli = filepath.Join(base, "cli-config.json")
	}
	// Both files pass place's check before either is written.
	for _, p := range []string{filepath.Join(base, "mcp.json"), cli} {
		if _, err := place(projectOf(rec.Scope), p); err != nil {
			return nil, err
		}
	}
	changes, err := editJSON(rec, filepath.Join(base, "mcp.json"), func(root *node) ([]string, error) {
		args := []string{"--code-dir", "${workspaceFolder}"}
		if !o.Global {
			// The project's .cursor/mcp.json comes with the repository:
			// an sbx entry there is not the user's own.
			if err := checkPlainServer(root, args); err != nil {
				return nil, err
			}
		}
		return addServer(root, args)
	})
	if err != nil {
		return nil, err
	}
	// Cursor's agent CLI honours permissions.deny; Cursor's editor agent
	// has no file setting for its built-in tools (see examples/cursor).
	more, err := editJSON(rec, cli, func(root *node) ([]string, error) {
		perms, err := root.object("permissions", "cli config")
		if err != nil {
			return nil, err
		}
		added, err := perms.addStrings("deny", "permissions", "Shell(**)", "Read(**)", "Write(**)")
		if err != nil || len(added) == 0 {
			return nil, err
		}
		return []string{"permissions.deny += " + strings.Join(added, ", ")}, nil
	})
	return append(changes, more...), err
}

func setupWindsurf(o Options, rec *record) ([]string, error) {
	path := filepath.Join(o.Home, ".codeium", "windsurf", "mcp_config.json")
	return editJSON(rec, path, func(root *node) ([]string, error) {
		// Windsurf does not start MCP servers in the workspace: name it.
		return addServer(root, []string{"--code-dir", o.Dir})
	})
}

// checkPlainServer refuses an mcpServers.sbx in a project's file that is
// not plainly sbx-mcp (no arguments, or sbx's own, and no other field such
// as env): kept as the user's entry, the client would list it as sbx, for
// the user to enable, and run the repository's command on the host.
func checkPlainServer(root *node, ownArgs []string) error {
	servers := root.get("mcpServers")
	if servers == nil || servers.kind != 'o' || servers.get("sbx") == nil {
		return nil
	}
	entry, _ := servers.get("sbx").plain().(map[string]any)
	ok := entry != nil && entry["command"] == "sbx-mcp"
	for k, v := range entry {
		switch k {
		case "command":
		case "type":
			ok = ok && v == "stdio"
		case "args":
			a, _ := v.([]any)
			plain := len(a) == 0
			if len(a) == len(ownArgs) {
				plain = true
				for i := range a {
					plain = plain && a[i] == ownArgs[i]
				}
			}
			ok = ok && plain
		default:
			ok = false
		}
	}
	if ok {
		return nil
	}
	return fmt.Errorf("%w: it names an MCP server sbx that is not plainly sbx-mcp: %s; the file comes with the project, and the client would list that server as sbx and run it on the host: remove the sbx entry (sbx setup then adds its own)", ErrCheck, servers.get("sbx").encode())
}

// addServer adds mcpServers.sbx unless an entry of that name is there (the
// user's own, kept as it is).
func addServer(root *node, args []string) ([]string, error) {
	servers, err := root.object("mcpServers", "config")
	if err != nil {
		return nil, err
	}
	if servers.get("sbx") != nil {
		return nil, nil
	}
	entry := &node{kind: 'o'}
	entry.set("command", str("sbx-mcp"))
	a := &node{kind: 'a', elems: []*node{}}
	for _, s := range args {
		a.elems = append(a.elems, str(s))
	}
	entry.set("args", a)
	servers.set("sbx", entry)
	return []string{"mcpServers.sbx = sbx-mcp " + strings.Join(args, " ")}, nil
}

// claudeConnected is the line of `claude mcp list` for sbx, connected: the
// command sbx-mcp (a path to it, or the name), the status last on the line
// (a server's own arguments could say "Connected" anywhere before it).
var claudeConnected = regexp.MustCompile(`(?m)^sbx: (?:\S*/)?sbx-mcp(?: .*)? - [✓✔] Connected\s*$`)

// projectScoped reports whether the first Scope line of `claude mcp get`
// says the project's (lines after it may be the server's own arguments).
func projectScoped(out []byte) bool {
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "Scope:"); ok {
			return strings.HasPrefix(strings.TrimSpace(s), "Project config")
		}
	}
	return false
}

// checkProjectServer refuses a project whose .mcp.json (Claude Code's
// project servers, which come with the repository) names a server "sbx"
// that is not plainly sbx-mcp: `claude mcp get sbx` would find it and sbx
// would keep it as the user's entry, and Claude Code would offer it for
// approval under sbx's name, to run the repository's command on the host.
func checkProjectServer(dir string) error {
	path := filepath.Join(dir, ".mcp.json")
	// A regular file only, read without waiting, bounded: the
	// repository's .mcp.json linked to /dev/stdin held sbx setup reading
	// the terminal, to /dev/zero reading without end.
	raw, err := regfile.Read(path, true)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		return nil // not a file Claude Code reads servers from either
	}
	entry, ok := cfg.MCPServers["sbx"]
	if !ok {
		return nil
	}
	var plain struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	dec := json.NewDecoder(bytes.NewReader(entry))
	dec.DisallowUnknownFields()
	if dec.Decode(&plain) == nil && plain.Command == "sbx-mcp" && len(plain.Args) == 0 && (plain.Type == "" || plain.Type == "stdio") {
		return nil
	}
	return fmt.Errorf("%w: %s (it comes with the project) defines an MCP server named sbx that is not plainly sbx-mcp: %s; Claude Code would offer it for approval as sbx and run it on the host. Remove the sbx entry from %s (or make it {\"command\": \"sbx-mcp\"}), then run sbx setup claude-code again", ErrCheck, path, strings.TrimSpace(string(entry)), path)
}

// verify asks the client itself whether sbx is its tool provider now.
func verify(ctx context.Context, o Options) error {
	switch o.Client {
	case "claude-code":
		out, err := o.run(ctx, "claude", "mcp", "list")
		if err != nil || !claudeConnected.Match(out) {
			return fmt.Errorf("%w: `claude mcp list` does not show sbx Connected:\n%s\nCheck that sbx-mcp starts (`sbx-mcp --help`, `sbx doctor`) and that $(go env GOPATH)/bin is on the PATH Claude Code sees", ErrCheck, strings.TrimSpace(string(out)))
		}
		fmt.Fprintln(o.Stdout, "verified: claude mcp list shows sbx Connected")
		return nil
	case "codex":
		out, err := o.run(ctx, "codex", "debug", "prompt-input", "hi")
		if err != nil {
			return fmt.Errorf("%w: `codex debug prompt-input` failed: %v\n%s", ErrCheck, err, strings.TrimSpace(string(out)))
		}
		if problems := CheckCodexPrompt(out); len(problems) > 0 {
			return fmt.Errorf("%w: `codex debug prompt-input` shows Codex can still reach the host: %s", ErrCheck, strings.Join(problems, "; "))
		}
		fmt.Fprintln(o.Stdout, "verified: codex debug prompt-input lists mcp__sbx, no shell or image tool of Codex's own, and its apply_patch confined by a read-only sandbox with approvals never asked")
		return nil
	}
	fmt.Fprintf(o.Stdout, "not verified by %s itself (it has no command-line check): open its MCP settings and check that sbx is listed and enabled\n", o.Client)
	if o.Client == "cursor" {
		fmt.Fprintln(o.Stdout, "manual step: in Cursor's agent settings turn the built-in terminal off (or to ask) so commands go through sbx's bash")
	} else {
		fmt.Fprintln(o.Stdout, "manual step: in Windsurf's Cascade settings turn auto-execution of terminal commands off so commands go through sbx's bash")
	}
	return nil
}

// codexHostTools are Codex's own tools that run commands or write files on
// the host, or read host files into the model (view_image).
var codexHostTools = map[string]bool{
	"shell": true, "shell_command": true, "exec_command": true, "write_stdin": true,
	"local_shell": true, "container.exec": true, "view_image": true,
}

var nestedTool = regexp.MustCompile("### `([^`]+)`")

// CheckCodexPrompt reads `codex debug prompt-input` output and says what is
// wrong with it: a Codex tool that reaches the host, apply_patch without the
// read-only sandbox and "never" approvals that refuse its writes, or no
// mcp__sbx tools.
func CheckCodexPrompt(out []byte) []string {
	start := bytes.IndexByte(out, '[')
	var items []map[string]any
	if start < 0 || json.Unmarshal(out[start:], &items) != nil {
		// Codex prints warnings around the JSON: take the outermost array.
		end := bytes.LastIndexByte(out, ']')
		if start < 0 || end < start || json.Unmarshal(out[start:end+1], &items) != nil {
			return []string{"its output is not the JSON list of prompt items it prints"}
		}
	}
	var names []string
	var walk func(tools []any)
	walk = func(tools []any) {
		for _, t := range tools {
			m, _ := t.(map[string]any)
			name, _ := m["name"].(string)
			if m["type"] == "namespace" {
				names = append(names, name)
				sub, _ := m["tools"].([]any)
				walk(sub)
				continue
			}
			names = append(names, name)
			desc, _ := m["description"].(string)
			for _, n := range nestedTool.FindAllStringSubmatch(desc, -1) {
				names = append(names, n[1])
			}
		}
	}
	// Codex's own words only: its developer messages (a user message holds
	// the project's AGENTS.md, which the repository writes), and for the
	// sandbox and approvals its permissions instructions alone (a skill's
	// description is a developer message too).
	var text, perms strings.Builder
	for _, it := range items {
		tools, _ := it["tools"].([]any)
		walk(tools)
		if role, _ := it["role"].(string); role != "developer" && role != "system" {
			continue
		}
		content, _ := it["content"].([]any)
		for _, c := range content {
			m, _ := c.(map[string]any)
			s, _ := m["text"].(string)
			text.WriteString(s + "\n")
			if strings.HasPrefix(s, "<permissions instructions>") {
				perms.WriteString(s + "\n")
			}
		}
	}
	var problems []string
	hasSbx, hasPatch := false, false
	for _, n := range names {
		if codexHostTools[n] {
			problems = append(problems, fmt.Sprintf("Codex's own %s tool is on", n))
		}
		if strings.HasPrefix(n, "mcp__sbx") {
			hasSbx = true
		}
		if n == "apply_patch" {
			hasPatch = true
		}
	}
	all := text.String()
	if strings.Contains(all, "Deferred tool namespaces:\n- mcp__sbx:") || strings.Contains(all, "- mcp__sbx:") {
		hasSbx = true
	}
	if p := perms.String(); hasPatch && !(strings.Contains(p, "`sandbox_mode` is `read-only`") && strings.Contains(p, "Approval policy is currently never")) {
		problems = append(problems, "Codex's apply_patch can write the host: its sandbox is not read-only with approval policy never (a profile, a project .codex/config.toml or a -c/-s flag overrides ~/.codex/config.toml?)")
	}
	if !hasSbx {
		problems = append(problems, "no mcp__sbx tools: Codex did not start sbx-mcp (is it on PATH? run `sbx-mcp --help`)")
	}
	return problems
}
