// Package app is the wiring both mains share: it turns the configuration
// (files, environment, the mains' flags) into a backend, a session.Manager
// and the session.Params of the sessions they open, so that sbx and sbx-mcp
// cannot drift apart. The mains keep only their flags and their faces (a
// command line, an MCP server), as tailscale's cmd/ do.
package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
)

// Main runs this binary as a sandbox init, an in-pod helper or a kept
// cluster session's relay when it was re-executed as one, and returns
// otherwise, with the descriptors it inherited past stderr made
// close-on-exec (closeInheritedOnExec). Both mains call it first.
func Main() {
	local.Main()        // a sandbox init re-executes this binary
	inpod.Main()        // so does a remote sandbox's helper
	cluster.RelayMain() // and a kept cluster session's relay
	closeInheritedOnExec()
}

// Kind says how the process that opens sessions lives, which decides the
// cluster backend's relay and whether it must start inside a code dir.
type Kind int

const (
	// PerCommand is a process per command (sbx exec), run from inside a
	// code dir: a kept cluster session's processes share one exec of the
	// in-pod helper through a relay, as a later process cannot reuse this
	// one's exec.
	PerCommand Kind = iota
	// Server is a long-lived process (sbx-mcp) holding its sessions' execs
	// itself: it needs no relay, and started outside the code dirs it
	// starts its commands in the first one.
	Server
)

// Flags are what a main's flags set; the zero value of each means "as the
// configuration says".
type Flags struct {
	CodeDirs     []string // --code-dir, repeatable
	Net          bool     // --net: share the host network
	Timeout      string   // --timeout
	IdleTTL      string   // --idle-ttl
	Disk         string   // --disk
	HostCommands []string // --host-command, repeatable; nil: the config's list
	AllowNet     []string // --allow-net, repeatable; nil: the config's list
	Backend      string   // --backend
	Keep         bool     // --keep
}

// Env is the ready-made wiring of a command run from the current directory.
type Env struct {
	Config config.Config
	// Cwd is the current directory, symlinks resolved.
	Cwd string
	// StartDir is where a command starts: Cwd when it is inside a code dir,
	// else (a Server only) the first code dir.
	StartDir string
	Provider sandbox.Provider
	Manager  *session.Manager
	// Params are the sessions' set-up: code dirs, network, limits, host
	// commands, environment, sync paths, journal, keep.
	Params session.Params
}

// CodeDirError is a code dir that cannot be used (missing, the home
// directory, overlapping), with the directory sbx was started in.
type CodeDirError struct {
	Cwd string
	Err error
}

func (e *CodeDirError) Error() string { return e.Err.Error() }
func (e *CodeDirError) Unwrap() error { return e.Err }

// Setup loads the configuration for the current directory (defaults, the
// user's file, the project's .sbx.toml, the environment), applies flags,
// chooses and checks the code dirs (the flags', else the config's, else the
// git top level of the current directory, else the current directory) and
// builds the backend and the manager. A *config.Error is the user's to fix
// in flags or config files; a *CodeDirError names unusable code dirs.
func Setup(f Flags, kind Kind, log *slog.Logger) (*Env, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("find the current directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	cfg, err := config.LoadProject(cwd, GitTop(cwd))
	if err != nil {
		return nil, err
	}
	if err := applyFlags(&cfg, f); err != nil {
		return nil, err
	}
	if err := checkEgress(cfg); err != nil {
		return nil, err
	}
	prefixes, err := router.ParsePrefixes(cfg.HostCommands)
	if err != nil {
		return nil, err
	}
	root, err := session.DefaultStateRoot()
	if err != nil {
		return nil, err
	}
	codeDirs, err := ResolveCodeDirs(ChooseCodeDirs(f.CodeDirs, cfg.CodeDirs, cwd), root)
	if err != nil {
		return nil, &CodeDirError{Cwd: cwd, Err: err}
	}
	e := &Env{Config: cfg, Cwd: cwd, StartDir: codeDirs[0]}
	inside := false
	for _, d := range codeDirs {
		if Within(cwd, d) {
			inside, e.StartDir = true, cwd
		}
	}
	if !inside && kind == PerCommand {
		// A command runs where the user is; a server starts in a code dir.
		return nil, fmt.Errorf("the current directory %s is not inside a code dir (%s): cd into one, or pass --code-dir", cwd, strings.Join(codeDirs, ", "))
	}
	prov, persistent, err := NewProvider(cfg, kind, log)
	if err != nil {
		return nil, err
	}
	e.Provider = prov
	e.Manager = newManager(root, prov, cfg, log)
	e.Params = session.Params{
		CodeDirs: codeDirs, Network: sandbox.Network(cfg.Network),
		Limits:  sandbox.Limits{MemoryBytes: cfg.Memory, Pids: cfg.Pids, DiskBytes: cfg.Disk},
		IdleTTL: cfg.IdleTTL, HostCommands: prefixes, Exclude: cfg.Exclude, MemoryWorkspace: cfg.Workspace == "auto",
		ForwardEnv: cfg.ForwardEnv, EnvSkip: cfg.EnvSkip,
		// A new slice: appending to the config's would write into its
		// backing array.
		SyncPaths:   append(append([]string(nil), cfg.SyncPaths...), cfg.TaskFiles...),
		JournalSize: JournalSize(cfg),
		// A persistent cluster session survives the process that opened it
		// (it is reattached by its session name), so it is kept.
		Keep: f.Keep || persistent,
		// A long-lived process keeps the host side's manifests current
		// from file-system events; a process per command scans.
		Watch: kind == Server,
		// The cluster backend passes a command exactly this environment:
		// the pool's cache variables come from here (the local backend
		// sets its own).
		Env: clusterEnv(cfg),
	}
	return e, nil
}

// applyFlags sets what the flags say over the configuration, through the
// keys' own parsers (config.Keys).
func applyFlags(cfg *config.Config, f Flags) error {
	if f.Net {
		if err := cfg.SetFlag("--net", "host"); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		flag string
		list []string
	}{{"--code-dir", f.CodeDirs}, {"--host-command", f.HostCommands}, {"--allow-net", f.AllowNet}} {
		if l.list == nil {
			continue
		}
		if err := cfg.SetFlagList(l.flag, l.list); err != nil {
			return err
		}
	}
	for _, kv := range []struct{ flag, value string }{
		{"--timeout", f.Timeout},
		{"--idle-ttl", f.IdleTTL},
		{"--disk", f.Disk},
		{"--backend", f.Backend},
	} {
		if kv.value == "" {
			continue
		}
		if err := cfg.SetFlag(kv.flag, kv.value); err != nil {
			return err
		}
	}
	return nil
}

// Manager is the engine on the configured backend (the user's config and
// the environment, not a project's), for the commands that work on
// existing sessions by name: ls, release, accept, undo.
func Manager(kind Kind, log *slog.Logger) (*session.Manager, error) {
	root, err := session.DefaultStateRoot()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(config.Sources{})
	if err != nil {
		return nil, err
	}
	prov, _, err := NewProvider(cfg, kind, log)
	if err != nil {
		return nil, err
	}
	return newManager(root, prov, cfg, log), nil
}

// newManager is a manager whose Params (what Release uses to pull back a
// session found by name) follow cfg.
func newManager(root string, prov sandbox.Provider, cfg config.Config, log *slog.Logger) *session.Manager {
	m := session.NewManager(root, prov, log)
	m.Params = session.Params{Exclude: cfg.Exclude, JournalSize: JournalSize(cfg), Limits: sandbox.Limits{DiskBytes: cfg.Disk}}
	return m
}

// NewProvider is the backend cfg names ("cluster", else local), and
// whether its sessions are persistent (a cluster session reattached by
// name after a restart).
func NewProvider(cfg config.Config, kind Kind, log *slog.Logger) (sandbox.Provider, bool, error) {
	if cfg.Backend != "cluster" {
		return localProvider(cfg, log), false, nil
	}
	cc := ClusterConfig(cfg, kind)
	return cluster.New(cc, log), cc.Persistent, nil
}

// ClusterConfig is the cluster backend's configuration from cfg's
// cluster.* keys, with a relay for a process per command. The lead of the
// claims' shutdownTime is cfg's idle_ttl (one key; zero: the backend's
// default).
func ClusterConfig(cfg config.Config, kind Kind) cluster.Config {
	c := cfg.Cluster
	return cluster.Config{
		Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace, Pool: c.Pool,
		ClaimTimeout: c.ClaimTimeout, IdleTTL: cfg.IdleTTL, Persistent: c.Persistent,
		Relay: kind == PerCommand,
	}
}

// NewClusterProvider is the cluster backend configured by the user's
// config and the environment (cluster.* keys, AGENT_SANDBOX_*), with a
// relay for a process per command.
func NewClusterProvider(kind Kind, log *slog.Logger) (*cluster.Provider, cluster.Config, error) {
	cfg, err := config.Load(config.Sources{})
	if err != nil {
		return nil, cluster.Config{}, err
	}
	cc := ClusterConfig(cfg, kind)
	return cluster.New(cc, log), cc, nil
}

// JournalSize is the journal cap the sync uses: config 0 keeps no content.
func JournalSize(cfg config.Config) int64 {
	if cfg.JournalSize == 0 {
		return -1
	}
	return cfg.JournalSize
}
