// Package config loads sbx's configuration: one Config struct, one loader.
//
// Precedence: defaults < ~/.config/sbx/config.toml (the user's file) <
// ./.sbx.toml (the project's file) < environment (SBX_*, and AGENT_SANDBOX_*
// for the keys that had them before sbx) < flags. The project's file lives in
// the working tree, which sbx does not trust: it may narrow what the sandbox
// may do (less memory, a shorter idle time, no network) but never widen it
// (backend, network, code directories come only from the user's own file,
// environment or flags); trying is an error naming the file, key and line.
// Unknown keys and bad values are errors naming the file, key and line.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/sbx-sh/sbx/egress"
	"github.com/sbx-sh/sbx/internal/regfile"
)

// Config is everything sbx can be told.
// MinPids is the smallest pids limit: the limit counts threads, and the
// sandbox's init and command workers are Go programs whose runtime dies when
// it cannot start a thread.
const MinPids = 64

type Config struct {
	// Backend is "local" (the embedded sandbox) or "cluster" (Kubernetes with
	// agent-sandbox; its own settings are AGENT_SANDBOX_* variables).
	Backend string
	// Network is "none" (loopback only) or "host" (share the host network).
	Network string
	// AllowNet lists the hosts (names, "*.example.com" globs, addresses,
	// each with an optional port) the sandbox may reach through sbx's
	// egress proxy; empty means none. It has no effect with Network "host".
	AllowNet []string
	// Inject adds headers at the proxy to requests to listed hosts (only
	// from the user's own file); each host must be in AllowNet.
	Inject []egress.Injection
	// Cache is "shared" (sbx's package caches, shared by the user's
	// sessions), "session" (caches of the session's own) or "none".
	Cache string
	// Workspace is "auto" (a small tree's workspaces in memory, where the
	// local backend can bound them by the sandbox's memory cgroup) or
	// "disk" (always in the session's state dir).
	Workspace string
	// HostCaches names host caches mounted read-only ("go-mod").
	HostCaches []string
	// IdleTTL releases a kept session that has run nothing for this long.
	IdleTTL time.Duration
	// Timeout is the default timeout of `sbx exec`; zero means none.
	Timeout time.Duration
	// HostDaemon lets a kept CLI session keep a host daemon (internal/hostd)
	// that watches its code dirs, so that later `sbx exec` calls skip the
	// scan of the whole tree.
	HostDaemon bool
	// Memory limits the sandbox's memory in bytes; zero means no limit.
	Memory int64
	// Disk limits, in bytes, what one command may bring back to the host
	// (the pull's total) and the sandbox's workspace on the host disk;
	// zero means no limit.
	Disk int64
	// Pids limits the number of processes in the sandbox; zero means no limit.
	// The limit counts threads, the sandbox's own init and workers' too
	// (Go programs, a few threads each), hence MinPids.
	Pids int
	// JournalSize caps each session's journal of the host files its
	// pull-backs overwrote or deleted (sbx undo), in bytes; zero keeps no
	// content. Only the user's own config sets it.
	JournalSize int64
	// CodeDirs are the host directories synced with the sandbox.
	CodeDirs []string
	// HostCommands are the command prefixes that run on the host (see
	// package router); setting them replaces the default list.
	HostCommands []string
	// Exclude adds sync exclude patterns (gitignore syntax).
	Exclude []string
	// ForwardEnv names host environment variables (names or doublestar
	// globs) that enter the sandbox; nothing does by default. EnvSkip
	// withholds names even when forwarded.
	ForwardEnv, EnvSkip []string
	// SyncPaths and TaskFiles are host files or directories copied into the
	// sandbox at the same path when it is claimed, read-only, never back.
	SyncPaths, TaskFiles []string
	// Cluster is the cluster backend's settings (table [cluster]).
	Cluster Cluster
}

// Cluster is what the cluster backend is told; zero fields take the
// backend's defaults. Its shutdownTime lead is IdleTTL's (one key).
type Cluster struct {
	// Kubeconfig is the kubeconfig file; empty means
	// ~/.kube/agent-sandbox.yaml when it exists, else client-go's rules.
	Kubeconfig string
	// Context is the kubeconfig context; empty means its current one.
	Context string
	// Namespace holds the pool and the claims.
	Namespace string
	// Pool is the SandboxWarmPool to claim from.
	Pool string
	// ClaimTimeout bounds how long a claim may take to become Ready.
	ClaimTimeout time.Duration
	// Persistent makes a session key map to one claim, reused after a
	// restart.
	Persistent bool
	// CacheMount is where the pool's pods mount the tenant's per-node
	// package cache (sbx pool render --cache-mount): the engine points the
	// commands' GOMODCACHE, GOCACHE, ... below it. Empty: none.
	CacheMount string
	// EgressProxy is the URL of the allowlist proxy the pool's pods reach
	// (sbx proxy behind the rendered NetworkPolicy): the engine announces it
	// to the commands as HTTPS_PROXY, HTTP_PROXY and NO_PROXY. Empty: none.
	EgressProxy string
}

// Defaults returns the built-in configuration.
func Defaults() Config {
	return Config{
		Backend:      "local",
		Network:      "none",
		Cache:        "shared",
		Workspace:    "auto",
		IdleTTL:      30 * time.Minute,
		HostDaemon:   true,
		Memory:       4 << 30,
		Disk:         10 << 30,
		Pids:         4096,
		JournalSize:  1 << 30,
		HostCommands: append([]string(nil), DefaultHostCommands...),
		Cluster:      Cluster{Namespace: "sbx", ClaimTimeout: 180 * time.Second},
	}
}

// DefaultHostCommands are the git network commands, which need the user's
// credentials. (The router validates entries; config only carries them.)
var DefaultHostCommands = []string{"git push", "git fetch", "git pull", "git clone", "git ls-remote", "git remote add", "git remote set-url"}

// Error is a configuration error: where it was found and what is wrong.
type Error struct {
	Source string // file path, "environment" or "flags"
	Key    string
	Line   int // 0 when unknown or not from a file
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Sources names where Load looks.
type Sources struct {
	// UserFile is the user's own config; empty means the default
	// ($XDG_CONFIG_HOME/sbx/config.toml or ~/.config/sbx/config.toml).
	UserFile string
	// ProjectFile is the working tree's config (untrusted); empty means none.
	ProjectFile string
	// Env is the environment as KEY=VALUE; nil means os.Environ().
	Env []string
}

// LoadProject loads the configuration with the project's file: the first
// .sbx.toml found in dirs (the current directory, then the git top level;
// empty entries are skipped).
func LoadProject(dirs ...string) (Config, error) {
	project := ""
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, ".sbx.toml")); err == nil {
			project = filepath.Join(d, ".sbx.toml")
			break
		}
	}
	return Load(Sources{ProjectFile: project})
}

// UserFile returns the default path of the user's config file.
func UserFile() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "sbx", "config.toml")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "sbx", "config.toml")
}

// Load builds the configuration from defaults, files and environment. Flags
// are applied by the caller on the result, last.
func Load(src Sources) (Config, error) {
	cfg := Defaults()
	user := src.UserFile
	if user == "" {
		user = UserFile()
	}
	if user != "" {
		if err := applyFile(&cfg, user, true); err != nil {
			return cfg, err
		}
	}
	if src.ProjectFile != "" {
		if err := applyFile(&cfg, src.ProjectFile, false); err != nil {
			return cfg, err
		}
	}
	env := src.Env
	if env == nil {
		env = os.Environ()
	}
	if err := applyEnv(&cfg, env); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func applyFile(cfg *Config, path string, trusted bool) error {
	// A regular file only, and the project's not through a link (a cloned
	// repository's .sbx.toml linked to /dev/zero or /dev/stdin was read
	// without end); the user's own may be a link (dotfiles).
	raw, err := regfile.Read(path, trusted)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &Error{Source: path, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	var doc map[string]any
	if _, err := toml.Decode(string(raw), &doc); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return &Error{Source: path, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
		}
		var ppe *toml.ParseError
		if errors.As(err, &ppe) {
			return &Error{Source: path, Line: ppe.Position.Line, Key: ppe.LastKey, Msg: ppe.Message}
		}
		return &Error{Source: path, Msg: err.Error()}
	}
	fail := func(key, msg string) error {
		return &Error{Source: path, Key: key, Line: lineOf(raw, key), Msg: msg}
	}
	// Flatten one level of tables ([cluster] pool = ... is cluster.pool)
	// and refuse what no key names.
	vals := map[string]any{}
	for _, name := range sortedKeys(doc) {
		v := doc[name]
		if tbl, ok := v.(map[string]any); ok && isTable(name) {
			for _, sub := range sortedKeys(tbl) {
				vals[name+"."+sub] = tbl[sub]
			}
			continue
		}
		vals[name] = v
	}
	for _, name := range sortedKeys(vals) {
		if k := Lookup(name); k == nil || k.Sources&UserFileSource == 0 {
			return fail(name, "unknown key (known keys: "+strings.Join(knownKeys(), ", ")+")")
		}
	}
	for _, k := range Keys {
		v, ok := vals[k.Name]
		if !ok {
			continue
		}
		if !trusted && k.narrows == nil {
			return fail(k.Name, "the project's .sbx.toml may only narrow what the sandbox may do; set this in your own "+UserFile()+", the environment or a flag")
		}
		x, err := k.parse(v)
		if err != nil {
			return fail(k.Name, err.Error())
		}
		if !trusted && !k.narrows(k.get(cfg), x) {
			return fail(k.Name, "the project's .sbx.toml may only narrow what the sandbox may do (here: "+k.Narrow+"); set this in your own "+UserFile()+", the environment or a flag")
		}
		if err := k.apply(cfg, v); err != nil {
			return fail(k.Name, err.Error())
		}
	}
	return nil
}

// isTable reports whether name is a table of keys (cluster).
func isTable(name string) bool {
	for _, k := range Keys {
		if strings.HasPrefix(k.Name, name+".") {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// narrower reports whether limit v is at most cur, where 0 means unlimited.
func narrower(v, cur int64) bool {
	if cur == 0 {
		return v >= 0
	}
	return v > 0 && v <= cur
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := []string{}
	for _, x := range list {
		s, ok := x.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func knownKeys() []string {
	keys := make([]string, len(Keys))
	for i, k := range Keys {
		keys[i] = k.Name
	}
	return keys
}

// lineOf finds the line where key is set, for error messages: a dotted
// key as written, else its last part (set inside its [table]).
func lineOf(raw []byte, key string) int {
	if n := lineOfKey(raw, key); n > 0 || !strings.Contains(key, ".") {
		return n
	}
	return lineOfKey(raw, key[strings.LastIndex(key, ".")+1:])
}

func lineOfKey(raw []byte, key string) int {
	for i, line := range strings.Split(string(raw), "\n") {
		l := strings.TrimSpace(line)
		l = strings.Trim(l, `"'`)
		if strings.HasPrefix(l, key) {
			rest := strings.TrimLeft(strings.TrimPrefix(l, key), `"' `)
			if strings.HasPrefix(rest, "=") {
				return i + 1
			}
		}
	}
	return 0
}

func checkBackend(s string) error {
	if s != "local" && s != "cluster" {
		return fmt.Errorf("unknown backend %q (local or cluster)", s)
	}
	return nil
}

func checkNetwork(s string) error {
	if s != "none" && s != "host" {
		return fmt.Errorf("network must be \"none\" (loopback only) or \"host\", not %q", s)
	}
	return nil
}

// durationValue takes a Go duration string ("30m") or a number of seconds.
func durationValue(v any) (time.Duration, error) {
	switch x := v.(type) {
	case int64:
		return secondsDuration(x)
	case string:
		return ParseDuration(x)
	}
	return 0, fmt.Errorf("want a duration such as \"30m\" or a number of seconds, got %T", v)
}

func secondsDuration(n int64) (time.Duration, error) {
	if n < 0 || n > 1<<31 {
		return 0, fmt.Errorf("%d seconds is out of range", n)
	}
	return time.Duration(n) * time.Second, nil
}

// ParseDuration takes a Go duration ("90s", "30m") or a number of seconds.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return secondsDuration(n)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (use e.g. \"90s\", \"30m\" or a number of seconds)", s)
	}
	return d, nil
}

func sizeValue(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("%d is negative", x)
		}
		return x, nil
	case string:
		return ParseSize(x)
	}
	return 0, fmt.Errorf("want a size such as \"4GiB\" or a number of bytes, got %T", v)
}

// ParseSize takes a byte count with an optional unit: "4GiB", "512M", "1000".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (use e.g. \"4GiB\", \"512MiB\" or a number of bytes)", s)
	}
	return n * mult, nil
}

func applyEnv(cfg *Config, env []string) error {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v
		}
	}
	for _, k := range Keys {
		for _, name := range k.Env {
			// An empty variable is an unset one.
			v, ok := vals[name]
			if !ok || v == "" {
				continue
			}
			if err := k.apply(cfg, text(v)); err != nil {
				return &Error{Source: "environment", Key: name, Msg: err.Error()}
			}
		}
	}
	return nil
}

// Set sets one key from its text form, as the environment gives it
// (lists split as the README says), replacing or, for an Append key,
// adding to its value.
func (c *Config) Set(key, v string) error {
	k := Lookup(key)
	if k == nil {
		return fmt.Errorf("unknown key %q (known keys: %s)", key, strings.Join(knownKeys(), ", "))
	}
	return k.apply(c, text(v))
}

// SetFlag sets the key whose flag is flag ("--timeout") from the flag's
// value; the error is a *Error naming the flag.
func (c *Config) SetFlag(flag, v string) error {
	k := flagKey(flag)
	if k == nil {
		return &Error{Source: "flags", Key: flag, Msg: "no configuration key has this flag"}
	}
	if err := k.apply(c, text(v)); err != nil {
		return &Error{Source: "flags", Key: flag, Msg: err.Error()}
	}
	return nil
}

// SetFlagList sets the list key whose repeatable flag is flag from the
// flag's values, one element each; an empty element is an error.
func (c *Config) SetFlagList(flag string, vs []string) error {
	k := flagKey(flag)
	if k == nil {
		return &Error{Source: "flags", Key: flag, Msg: "no configuration key has this flag"}
	}
	list := make([]any, len(vs))
	for i, v := range vs {
		list[i] = v
	}
	if err := k.apply(c, list); err != nil {
		return &Error{Source: "flags", Key: flag, Msg: fmt.Sprintf("%v (each %s takes one non-empty value)", err, flag)}
	}
	return nil
}

func flagKey(flag string) *Key {
	for _, k := range Keys {
		if k.Flag == flag && k.Sources&FlagSource != 0 {
			return k
		}
	}
	return nil
}
