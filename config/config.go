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
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
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
	// IdleTTL releases a kept session that has run nothing for this long.
	IdleTTL time.Duration
	// Timeout is the default timeout of `sbx exec`; zero means none.
	Timeout time.Duration
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
}

// Defaults returns the built-in configuration.
func Defaults() Config {
	return Config{
		Backend:      "local",
		Network:      "none",
		IdleTTL:      30 * time.Minute,
		Memory:       4 << 30,
		Disk:         10 << 30,
		Pids:         4096,
		JournalSize:  1 << 30,
		HostCommands: append([]string(nil), DefaultHostCommands...),
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

// fileConfig is the TOML form. Pointers tell set keys from absent ones.
// Every value is decoded as any and checked here, so that a value of the
// wrong type is reported like any other bad value, with its key and line.
type fileConfig struct {
	Backend  *any `toml:"backend"`
	Network  *any `toml:"network"`
	IdleTTL  *any `toml:"idle_ttl"`
	Timeout  *any `toml:"timeout"`
	Memory   *any `toml:"memory"`
	Disk     *any `toml:"disk"`
	Pids     *any `toml:"pids"`
	CodeDirs *any `toml:"code_dirs"`
	// host_commands in the project's file may only drop entries.
	HostCommands *any `toml:"host_commands"`
	Exclude      *any `toml:"exclude"`
	// forward_env in the project's file may only drop entries; env_skip may
	// only add.
	ForwardEnv *any `toml:"forward_env"`
	EnvSkip    *any `toml:"env_skip"`
	SyncPaths  *any `toml:"sync_paths"`
	TaskFiles  *any `toml:"task_files"`
	// journal_size only in the user's own file: a smaller journal is less
	// of a safety net, not less of a risk.
	JournalSize *any `toml:"journal_size"`
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
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &Error{Source: path, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	var fc fileConfig
	md, err := toml.Decode(string(raw), &fc)
	if err != nil {
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
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0].String()
		return &Error{Source: path, Key: k, Line: lineOf(raw, und[0][len(und[0])-1]), Msg: "unknown key (known keys: " + strings.Join(knownKeys(), ", ") + ")"}
	}
	fail := func(key, msg string) error {
		return &Error{Source: path, Key: key, Line: lineOf(raw, key), Msg: msg}
	}
	widen := func(key string) error {
		return fail(key, "the project's .sbx.toml may only narrow what the sandbox may do; set this in your own "+UserFile()+", the environment or a flag")
	}
	if fc.Backend != nil {
		if !trusted {
			return widen("backend")
		}
		v, ok := (*fc.Backend).(string)
		if !ok {
			return fail("backend", "want a string such as \"local\"")
		}
		if err := checkBackend(v); err != nil {
			return fail("backend", err.Error())
		}
		cfg.Backend = v
	}
	if fc.Network != nil {
		v, ok := (*fc.Network).(string)
		if !ok {
			return fail("network", "want \"none\" or \"host\"")
		}
		if err := checkNetwork(v); err != nil {
			return fail("network", err.Error())
		}
		if !trusted && v != "none" {
			return widen("network")
		}
		cfg.Network = v
	}
	if fc.CodeDirs != nil {
		if !trusted {
			return widen("code_dirs")
		}
		list, ok := (*fc.CodeDirs).([]any)
		if !ok {
			return fail("code_dirs", "want a list of directory paths")
		}
		cfg.CodeDirs = nil
		for _, x := range list {
			d, ok := x.(string)
			if !ok || d == "" {
				return fail("code_dirs", "want a list of directory paths")
			}
			cfg.CodeDirs = append(cfg.CodeDirs, d)
		}
	}
	if fc.HostCommands != nil {
		list, ok := stringList(*fc.HostCommands)
		if !ok {
			return fail("host_commands", "want a list of command prefixes such as [\"git push\"]")
		}
		if !trusted {
			for _, h := range list {
				if !contains(cfg.HostCommands, h) {
					return widen("host_commands")
				}
			}
		}
		cfg.HostCommands = list
	}
	if fc.ForwardEnv != nil {
		list, ok := stringList(*fc.ForwardEnv)
		if !ok {
			return fail("forward_env", "want a list of variable names or globs")
		}
		if !trusted {
			for _, h := range list {
				if !contains(cfg.ForwardEnv, h) {
					return widen("forward_env")
				}
			}
		}
		cfg.ForwardEnv = list
	}
	if fc.EnvSkip != nil {
		list, ok := stringList(*fc.EnvSkip)
		if !ok {
			return fail("env_skip", "want a list of variable names or globs")
		}
		cfg.EnvSkip = append(cfg.EnvSkip, list...)
	}
	for _, l := range []struct {
		key string
		v   *any
		dst *[]string
	}{{"sync_paths", fc.SyncPaths, &cfg.SyncPaths}, {"task_files", fc.TaskFiles, &cfg.TaskFiles}} {
		if l.v == nil {
			continue
		}
		if !trusted {
			return widen(l.key)
		}
		list, ok := stringList(*l.v)
		if !ok {
			return fail(l.key, "want a list of absolute host paths")
		}
		for _, p := range list {
			if !filepath.IsAbs(p) {
				return fail(l.key, fmt.Sprintf("%q is not an absolute path", p))
			}
		}
		*l.dst = list
	}
	if fc.Exclude != nil {
		list, ok := stringList(*fc.Exclude)
		if !ok {
			return fail("exclude", "want a list of patterns")
		}
		// Excluding more keeps more in the sandbox: a narrowing, allowed to
		// the project's file too.
		cfg.Exclude = append(cfg.Exclude, list...)
	}
	for _, d := range []struct {
		key string
		v   *any
		dst *time.Duration
	}{{"idle_ttl", fc.IdleTTL, &cfg.IdleTTL}, {"timeout", fc.Timeout, &cfg.Timeout}} {
		if d.v == nil {
			continue
		}
		dur, err := durationValue(*d.v)
		if err != nil {
			return fail(d.key, err.Error())
		}
		if !trusted && !narrower(int64(dur), int64(*d.dst)) {
			return widen(d.key)
		}
		*d.dst = dur
	}
	if fc.Memory != nil {
		n, err := sizeValue(*fc.Memory)
		if err != nil {
			return fail("memory", err.Error())
		}
		if !trusted && !narrower(n, cfg.Memory) {
			return widen("memory")
		}
		cfg.Memory = n
	}
	if fc.JournalSize != nil {
		if !trusted {
			return widen("journal_size")
		}
		n, err := sizeValue(*fc.JournalSize)
		if err != nil {
			return fail("journal_size", err.Error())
		}
		cfg.JournalSize = n
	}
	if fc.Disk != nil {
		n, err := sizeValue(*fc.Disk)
		if err != nil {
			return fail("disk", err.Error())
		}
		if !trusted && !narrower(n, cfg.Disk) {
			return widen("disk")
		}
		cfg.Disk = n
	}
	if fc.Pids != nil {
		n, ok := (*fc.Pids).(int64)
		if !ok || n < 0 || n > 1<<22 {
			return fail("pids", fmt.Sprintf("%v is not a process count (0 for no limit)", *fc.Pids))
		}
		if n > 0 && n < MinPids {
			return fail("pids", fmt.Sprintf("%d is below %d: the sandbox's own init and workers need up to ~32 of them (0 for no limit)", n, MinPids))
		}
		if !trusted && !narrower(n, int64(cfg.Pids)) {
			return widen("pids")
		}
		cfg.Pids = int(n)
	}
	return nil
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
	t := reflect.TypeOf(fileConfig{})
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("toml")
	}
	return keys
}

// lineOf finds the line where key is set, for error messages.
func lineOf(raw []byte, key string) int {
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

// envKeys maps each environment variable to the key it sets.
var envKeys = []struct{ name, key string }{
	{"SBX_BACKEND", "backend"},
	{"SBX_NETWORK", "network"},
	{"AGENT_SANDBOX_IDLE_TTL", "idle_ttl"},
	{"SBX_IDLE_TTL", "idle_ttl"},
	{"SBX_TIMEOUT", "timeout"},
	{"SBX_MEMORY", "memory"},
	{"SBX_DISK", "disk"},
	{"SBX_PIDS", "pids"},
	{"SBX_JOURNAL_SIZE", "journal_size"},
	{"AGENT_SANDBOX_CODE_DIRS", "code_dirs"},
	{"SBX_CODE_DIRS", "code_dirs"},
	{"AGENT_SANDBOX_HOST_COMMANDS", "host_commands"},
	{"SBX_HOST_COMMANDS", "host_commands"},
	{"AGENT_SANDBOX_FORWARD_ENV", "forward_env"},
	{"SBX_FORWARD_ENV", "forward_env"},
	{"AGENT_SANDBOX_ENV_SKIP", "env_skip"},
	{"SBX_ENV_SKIP", "env_skip"},
	{"AGENT_SANDBOX_SYNC_PATHS", "sync_paths"},
	{"SBX_SYNC_PATHS", "sync_paths"},
	{"AGENT_SANDBOX_TASK_FILES", "task_files"},
	{"SBX_TASK_FILES", "task_files"},
}

func applyEnv(cfg *Config, env []string) error {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v
		}
	}
	for _, e := range envKeys {
		v, ok := vals[e.name]
		if !ok || v == "" {
			continue
		}
		if err := cfg.Set(e.key, v); err != nil {
			return &Error{Source: "environment", Key: e.name, Msg: err.Error()}
		}
	}
	return nil
}

// Set sets one key from its text form, as the environment and flags give it.
func (c *Config) Set(key, v string) error {
	switch key {
	case "backend":
		if err := checkBackend(v); err != nil {
			return err
		}
		c.Backend = v
	case "network":
		if err := checkNetwork(v); err != nil {
			return err
		}
		c.Network = v
	case "idle_ttl", "timeout":
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		if key == "idle_ttl" {
			c.IdleTTL = d
		} else {
			c.Timeout = d
		}
	case "memory":
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		c.Memory = n
	case "disk":
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		c.Disk = n
	case "journal_size":
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		c.JournalSize = n
	case "pids":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a process count", v)
		}
		if n > 0 && n < MinPids {
			return fmt.Errorf("%d is below %d: the sandbox's own init and workers need up to ~32 of them (0 for no limit)", n, MinPids)
		}
		c.Pids = n
	case "code_dirs":
		c.CodeDirs = filepath.SplitList(v)
	case "forward_env", "env_skip":
		// Comma- or space-separated names and globs.
		list := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
		if key == "forward_env" {
			c.ForwardEnv = list
		} else {
			c.EnvSkip = list
		}
	case "sync_paths", "task_files":
		list := filepath.SplitList(v)
		for _, p := range list {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("%q is not an absolute path", p)
			}
		}
		if key == "sync_paths" {
			c.SyncPaths = list
		} else {
			c.TaskFiles = list
		}
	case "host_commands":
		// Comma-separated; "none" means nothing runs on the host.
		c.HostCommands = []string{}
		if strings.TrimSpace(v) == "none" {
			return nil
		}
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				c.HostCommands = append(c.HostCommands, h)
			}
		}
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}
