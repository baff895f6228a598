package config

import (
	"fmt"
	"net/url"

	"github.com/sbx-sh/sbx/egress"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source is a place a key may be set from.
type Source uint8

const (
	// UserFileSource is the user's own config file (trusted).
	UserFileSource Source = 1 << iota
	// ProjectFileSource is the working tree's .sbx.toml (untrusted: it may
	// only narrow, as the key's Narrow says).
	ProjectFileSource
	// EnvSource is the environment, through the key's Env variables.
	EnvSource
	// FlagSource is a main's flag, the key's Flag.
	FlagSource
)

// Key is one configuration key: where it may be set from, how its value is
// read and, when the project's file may set it, how a project value is
// judged to narrow. The same parser reads a key from every source.
type Key struct {
	// Name is the key in the TOML files ("cluster.pool" is key pool of
	// table [cluster]).
	Name string
	// Default is the built-in default as the README shows it (without
	// its backticks); "none" is the zero value.
	Default string
	// Env are the environment variables that set it; when several are set
	// the later one wins.
	Env []string
	// Flag is the flag that sets it ("--timeout"), or "".
	Flag string
	// Sources says where it may be set from (the built-in default aside).
	Sources Source
	// Narrow says how a project value is judged to narrow; "" when the
	// project's file may not set the key.
	Narrow string
	// Append marks a list every source adds to (file, environment, flag
	// alike); every other key is replaced by each later source.
	Append bool
	// parse reads a TOML value, or a text (env, flag) as a text.
	parse func(v any) (any, error)
	get   func(*Config) any
	set   func(*Config, any)
	// narrows reports whether v, from the project, narrows cur.
	narrows func(cur, v any) bool
}

// text is a value from the environment or a flag, as opposed to a TOML
// value of type string.
type text string

const (
	files   = UserFileSource | ProjectFileSource
	trusted = UserFileSource | EnvSource
)

// Keys is every configuration key, in the order they are applied and
// documented. The README's table is tested against it.
var Keys = []*Key{
	{Name: "backend", Default: `"local"`, Env: []string{"SBX_BACKEND"}, Flag: "--backend", Sources: trusted | FlagSource,
		parse: enumValue("want a string such as \"local\"", checkBackend),
		get:   func(c *Config) any { return c.Backend }, set: func(c *Config, v any) { c.Backend = v.(string) }},
	{Name: "network", Default: `"none"`, Env: []string{"SBX_NETWORK"}, Flag: "--net", Sources: trusted | FlagSource | ProjectFileSource,
		Narrow: `only "none"`,
		parse:  enumValue("want \"none\" or \"host\"", checkNetwork),
		get:    func(c *Config) any { return c.Network }, set: func(c *Config, v any) { c.Network = v.(string) },
		narrows: func(_, v any) bool { return v.(string) == "none" }},
	// allow_net widens what leaves the sandbox: a project may only list
	// fewer hosts. An entry is checked by the proxy's own parser.
	{Name: "allow_net", Default: "none", Env: []string{"SBX_ALLOW_NET"}, Flag: "--allow-net", Sources: trusted | FlagSource | ProjectFileSource,
		Narrow: "a subset of the list so far",
		parse:  listAny("want a list of hosts such as [\"example.com\", \"*.example.com:8443\"]", splitNames, checkAllowNet),
		get:    func(c *Config) any { return c.AllowNet }, set: func(c *Config, v any) { c.AllowNet = v.([]string) }, narrows: subset},
	// inject puts the user's credentials on the wire: only the user's own
	// file names them ([[inject]] tables).
	{Name: "inject", Default: "none", Sources: UserFileSource, parse: injectAny,
		get: func(c *Config) any { return c.Inject }, set: func(c *Config, v any) { c.Inject = v.([]egress.Injection) }},
	{Name: "cache", Default: `"shared"`, Env: []string{"SBX_CACHE"}, Sources: trusted | ProjectFileSource,
		Narrow: `"session" or "none"`,
		parse:  enumValue("want \"shared\", \"session\" or \"none\"", checkCache),
		get:    func(c *Config) any { return c.Cache }, set: func(c *Config, v any) { c.Cache = v.(string) },
		narrows: func(cur, v any) bool { return v.(string) != "shared" || cur.(string) == "shared" }},
	// workspace = "disk" costs the project nothing to ask for; "auto"
	// (memory for a small tree) only the user may choose.
	{Name: "workspace", Default: `"auto"`, Env: []string{"SBX_WORKSPACE"}, Sources: trusted | ProjectFileSource,
		Narrow: `"disk"`,
		parse:  enumValue("want \"auto\" or \"disk\"", checkWorkspace),
		get:    func(c *Config) any { return c.Workspace }, set: func(c *Config, v any) { c.Workspace = v.(string) },
		narrows: func(cur, v any) bool { return v.(string) == "disk" || cur.(string) == v.(string) }},
	{Name: "host_caches", Default: "none", Env: []string{"SBX_HOST_CACHES"}, Sources: trusted | ProjectFileSource,
		Narrow: "a subset of the list so far",
		parse:  listAny("want a list of host caches such as [\"go-mod\"]", splitNames, checkHostCache),
		get:    func(c *Config) any { return c.HostCaches }, set: func(c *Config, v any) { c.HostCaches = v.([]string) }, narrows: subset},
	{Name: "idle_ttl", Default: `"30m"`, Env: []string{"AGENT_SANDBOX_IDLE_TTL", "SBX_IDLE_TTL"}, Flag: "--idle-ttl", Sources: trusted | FlagSource | ProjectFileSource,
		Narrow: "no longer (0 is none)", parse: durationAny,
		get: func(c *Config) any { return c.IdleTTL }, set: func(c *Config, v any) { c.IdleTTL = v.(time.Duration) }, narrows: narrowerLimit},
	{Name: "host_daemon", Default: "true", Env: []string{"SBX_HOST_DAEMON"}, Sources: trusted,
		parse: boolAny,
		get:   func(c *Config) any { return c.HostDaemon }, set: func(c *Config, v any) { c.HostDaemon = v.(bool) }},
	{Name: "timeout", Default: "none", Env: []string{"SBX_TIMEOUT"}, Flag: "--timeout", Sources: trusted | FlagSource | ProjectFileSource,
		Narrow: "no longer (0 is none)", parse: durationAny,
		get: func(c *Config) any { return c.Timeout }, set: func(c *Config, v any) { c.Timeout = v.(time.Duration) }, narrows: narrowerLimit},
	{Name: "memory", Default: `"4GiB"`, Env: []string{"SBX_MEMORY"}, Sources: trusted | ProjectFileSource,
		Narrow: "no larger (0 is none)", parse: sizeAny,
		get: func(c *Config) any { return c.Memory }, set: func(c *Config, v any) { c.Memory = v.(int64) }, narrows: narrowerLimit},
	{Name: "disk", Default: `"10GiB"`, Env: []string{"SBX_DISK"}, Flag: "--disk", Sources: trusted | FlagSource | ProjectFileSource,
		Narrow: "no larger (0 is none)", parse: sizeAny,
		get: func(c *Config) any { return c.Disk }, set: func(c *Config, v any) { c.Disk = v.(int64) }, narrows: narrowerLimit},
	// journal_size only in the user's own config: a smaller journal is
	// less of a safety net, not less of a risk.
	{Name: "journal_size", Default: `"1GiB"`, Env: []string{"SBX_JOURNAL_SIZE"}, Sources: trusted, parse: sizeAny,
		get: func(c *Config) any { return c.JournalSize }, set: func(c *Config, v any) { c.JournalSize = v.(int64) }},
	{Name: "pids", Default: "4096", Env: []string{"SBX_PIDS"}, Sources: trusted | ProjectFileSource,
		Narrow: "no more (0 is none)", parse: pidsAny,
		get: func(c *Config) any { return int64(c.Pids) }, set: func(c *Config, v any) { c.Pids = int(v.(int64)) }, narrows: narrowerLimit},
	{Name: "code_dirs", Default: "git top level, else cwd", Env: []string{"AGENT_SANDBOX_CODE_DIRS", "SBX_CODE_DIRS"}, Flag: "--code-dir", Sources: trusted | FlagSource,
		parse: listAny("want a list of directory paths", splitPaths, nil),
		get:   func(c *Config) any { return c.CodeDirs }, set: func(c *Config, v any) { c.CodeDirs = v.([]string) }},
	{Name: "host_commands", Default: strings.Join(DefaultHostCommands, ", "), Env: []string{"AGENT_SANDBOX_HOST_COMMANDS", "SBX_HOST_COMMANDS"}, Flag: "--host-command",
		Sources: trusted | FlagSource | ProjectFileSource, Narrow: "a subset of the list so far",
		parse: listAny("want a list of command prefixes such as [\"git push\"]", splitCommands, nil),
		get:   func(c *Config) any { return c.HostCommands }, set: func(c *Config, v any) { c.HostCommands = v.([]string) }, narrows: subset},
	{Name: "forward_env", Default: "none", Env: []string{"AGENT_SANDBOX_FORWARD_ENV", "SBX_FORWARD_ENV"}, Sources: trusted | ProjectFileSource,
		Narrow: "a subset of the list so far",
		parse:  listAny("want a list of variable names or globs", splitNames, nil),
		get:    func(c *Config) any { return c.ForwardEnv }, set: func(c *Config, v any) { c.ForwardEnv = v.([]string) }, narrows: subset},
	{Name: "env_skip", Default: "none", Env: []string{"AGENT_SANDBOX_ENV_SKIP", "SBX_ENV_SKIP"}, Sources: trusted | ProjectFileSource, Append: true,
		Narrow: "anything (it only adds skips)",
		parse:  listAny("want a list of variable names or globs", splitNames, nil),
		get:    func(c *Config) any { return c.EnvSkip }, set: func(c *Config, v any) { c.EnvSkip = v.([]string) }, narrows: always},
	{Name: "sync_paths", Default: "none", Env: []string{"AGENT_SANDBOX_SYNC_PATHS", "SBX_SYNC_PATHS"}, Sources: trusted,
		parse: listAny("want a list of absolute host paths", splitPaths, checkAbs),
		get:   func(c *Config) any { return c.SyncPaths }, set: func(c *Config, v any) { c.SyncPaths = v.([]string) }},
	{Name: "task_files", Default: "none", Env: []string{"AGENT_SANDBOX_TASK_FILES", "SBX_TASK_FILES"}, Sources: trusted,
		parse: listAny("want a list of absolute host paths", splitPaths, checkAbs),
		get:   func(c *Config) any { return c.TaskFiles }, set: func(c *Config, v any) { c.TaskFiles = v.([]string) }},
	// Excluding more keeps more in the sandbox: a narrowing, allowed to
	// the project's file too.
	{Name: "exclude", Default: "see below", Env: []string{"SBX_EXCLUDE"}, Sources: trusted | ProjectFileSource, Append: true,
		Narrow: "anything (it only adds excludes)",
		parse:  listAny("want a list of patterns", splitNames, nil),
		get:    func(c *Config) any { return c.Exclude }, set: func(c *Config, v any) { c.Exclude = v.([]string) }, narrows: always},
	// The cluster backend's settings: never from the project's file (it
	// would point the user's credentials at another cluster or pool).
	{Name: "cluster.kubeconfig", Default: "~/.kube/agent-sandbox.yaml, else KUBECONFIG / ~/.kube/config / in-cluster", Env: []string{"AGENT_SANDBOX_KUBECONFIG"}, Sources: trusted,
		parse: stringAny("want a kubeconfig path"),
		get:   func(c *Config) any { return c.Cluster.Kubeconfig }, set: func(c *Config, v any) { c.Cluster.Kubeconfig = v.(string) }},
	{Name: "cluster.context", Default: "the kubeconfig's current context", Env: []string{"AGENT_SANDBOX_CONTEXT"}, Sources: trusted,
		parse: stringAny("want a kubeconfig context name"),
		get:   func(c *Config) any { return c.Cluster.Context }, set: func(c *Config, v any) { c.Cluster.Context = v.(string) }},
	{Name: "cluster.namespace", Default: `"sbx"`, Env: []string{"AGENT_SANDBOX_NAMESPACE"}, Sources: trusted,
		parse: stringAny("want a namespace name"),
		get:   func(c *Config) any { return c.Cluster.Namespace }, set: func(c *Config, v any) { c.Cluster.Namespace = v.(string) }},
	{Name: "cluster.pool", Default: "(required)", Env: []string{"AGENT_SANDBOX_POOL"}, Sources: trusted,
		parse: stringAny("want a SandboxWarmPool name"),
		get:   func(c *Config) any { return c.Cluster.Pool }, set: func(c *Config, v any) { c.Cluster.Pool = v.(string) }},
	{Name: "cluster.claim_timeout", Default: `"180s"`, Env: []string{"AGENT_SANDBOX_CLAIM_TIMEOUT"}, Sources: trusted,
		parse: positiveDuration,
		get:   func(c *Config) any { return c.Cluster.ClaimTimeout }, set: func(c *Config, v any) { c.Cluster.ClaimTimeout = v.(time.Duration) }},
	{Name: "cluster.persistent", Default: "false", Env: []string{"AGENT_SANDBOX_PERSISTENT"}, Sources: trusted,
		parse: boolAny,
		get:   func(c *Config) any { return c.Cluster.Persistent }, set: func(c *Config, v any) { c.Cluster.Persistent = v.(bool) }},
	{Name: "cluster.cache_mount", Default: "none", Env: []string{"AGENT_SANDBOX_CACHE_MOUNT"}, Sources: trusted,
		parse: enumValue("want the absolute path the pool mounts its cache at (sbx pool render --cache-mount)", checkCacheMount),
		get:   func(c *Config) any { return c.Cluster.CacheMount }, set: func(c *Config, v any) { c.Cluster.CacheMount = v.(string) }},
	{Name: "cluster.egress_proxy", Default: "none", Env: []string{"AGENT_SANDBOX_EGRESS_PROXY"}, Sources: trusted,
		parse: enumValue("want the proxy's URL, http://HOST:PORT (sbx proxy --listen in the cluster)", checkProxyURL),
		get:   func(c *Config) any { return c.Cluster.EgressProxy }, set: func(c *Config, v any) { c.Cluster.EgressProxy = v.(string) }},
}

// checkCacheMount accepts what sbx pool render --cache-mount does: an
// absolute, clean path other than /.
func checkCacheMount(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return fmt.Errorf("%q is not an absolute clean path other than /", p)
	}
	return nil
}

// Lookup is the key named name, or nil.
func Lookup(name string) *Key {
	for _, k := range Keys {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// apply parses v and sets it, appending for an Append key.
func (k *Key) apply(c *Config, v any) error {
	x, err := k.parse(v)
	if err != nil {
		return err
	}
	if k.Append {
		x = append(append([]string(nil), k.get(c).([]string)...), x.([]string)...)
	}
	k.set(c, x)
	return nil
}

func enumValue(want string, check func(string) error) func(any) (any, error) {
	return func(v any) (any, error) {
		s, ok := v.(string)
		if t, isText := v.(text); isText {
			s, ok = string(t), true
		}
		if !ok {
			return nil, fmt.Errorf("%s", want)
		}
		if err := check(s); err != nil {
			return nil, err
		}
		return s, nil
	}
}

func stringAny(want string) func(any) (any, error) {
	return enumValue(want, func(s string) error {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("%s, not an empty string", want)
		}
		return nil
	})
}

func durationAny(v any) (any, error) {
	if t, ok := v.(text); ok {
		return ParseDuration(string(t))
	}
	return durationValue(v)
}

func positiveDuration(v any) (any, error) {
	d, err := durationAny(v)
	if err == nil && d.(time.Duration) <= 0 {
		err = fmt.Errorf("want a positive duration such as \"3m\" or a number of seconds")
	}
	return d, err
}

func sizeAny(v any) (any, error) {
	if t, ok := v.(text); ok {
		return ParseSize(string(t))
	}
	return sizeValue(v)
}

func pidsAny(v any) (any, error) {
	n, ok := v.(int64)
	if t, isText := v.(text); isText {
		var err error
		n, err = strconv.ParseInt(strings.TrimSpace(string(t)), 10, 64)
		ok = err == nil
	}
	if !ok || n < 0 || n > 1<<22 {
		return nil, fmt.Errorf("%v is not a process count (0 for no limit)", v)
	}
	if n > 0 && n < MinPids {
		return nil, fmt.Errorf("%d is below %d: the sandbox's own init and workers need up to ~32 of them (0 for no limit)", n, MinPids)
	}
	return n, nil
}

func boolAny(v any) (any, error) {
	if t, ok := v.(text); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(string(t)))
		if err != nil {
			return nil, fmt.Errorf("%q: want true or false", string(t))
		}
		return b, nil
	}
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return nil, fmt.Errorf("want true or false")
}

// listAny reads a TOML list of non-blank strings, or a text split by split;
// check, when not nil, vets each element.
func listAny(want string, split func(string) ([]string, error), check func(string) error) func(any) (any, error) {
	return func(v any) (any, error) {
		var list []string
		if t, ok := v.(text); ok {
			var err error
			if list, err = split(string(t)); err != nil {
				return nil, err
			}
		} else {
			var ok bool
			if list, ok = stringList(v); !ok {
				return nil, fmt.Errorf("%s", want)
			}
		}
		if check != nil {
			for _, s := range list {
				if err := check(s); err != nil {
					return nil, err
				}
			}
		}
		return list, nil
	}
}

func checkAllowNet(s string) error {
	_, err := egress.ParseRule(s)
	return err
}

func checkCache(s string) error {
	if s != "shared" && s != "session" && s != "none" {
		return fmt.Errorf("cache must be \"shared\" (sbx's caches, shared by your sessions), \"session\" (one per session) or \"none\", not %q", s)
	}
	return nil
}

func checkWorkspace(s string) error {
	if s != "auto" && s != "disk" {
		return fmt.Errorf("workspace must be \"auto\" (a small tree's workspaces in memory where the sandbox's memory can be bounded) or \"disk\", not %q", s)
	}
	return nil
}

// HostCacheNames are the host caches host_caches may mount read-only.
var HostCacheNames = []string{"go-mod"}

func checkHostCache(s string) error {
	if !contains(HostCacheNames, s) {
		return fmt.Errorf("unknown host cache %q (known: %s)", s, strings.Join(HostCacheNames, ", "))
	}
	return nil
}

// injectAny reads [[inject]] tables: host, header, env or file, and
// optionally port and prefix.
func injectAny(v any) (any, error) {
	tables, ok := v.([]map[string]any)
	if !ok {
		return nil, fmt.Errorf("want [[inject]] tables with host, header and env or file")
	}
	out := []egress.Injection{}
	for i, t := range tables {
		var in egress.Injection
		for _, k := range sortedKeys(t) {
			x := t[k]
			str, isStr := x.(string)
			switch k {
			case "host":
				in.Host = str
			case "header":
				in.Header = str
			case "env":
				in.Env = str
			case "file":
				in.File = str
			case "prefix":
				in.Prefix = str
			case "port":
				n, ok := x.(int64)
				if !ok || n < 1 || n > 65535 {
					return nil, fmt.Errorf("inject %d: port %v is not a number from 1 to 65535", i+1, x)
				}
				in.Port, isStr = int(n), true
			default:
				return nil, fmt.Errorf("inject %d: unknown field %q (host, port, header, prefix, env, file)", i+1, k)
			}
			if !isStr {
				return nil, fmt.Errorf("inject %d: %s must be a string", i+1, k)
			}
		}
		if in.Host == "" || in.Header == "" {
			return nil, fmt.Errorf("inject %d: host and header are required", i+1)
		}
		if (in.Env == "") == (in.File == "") {
			return nil, fmt.Errorf("inject %d (%s): give exactly one of env (a host variable) or file (a host file) for the value", i+1, in.Host)
		}
		if in.File != "" && !filepath.IsAbs(in.File) {
			return nil, fmt.Errorf("inject %d (%s): file %q is not an absolute path", i+1, in.Host, in.File)
		}
		out = append(out, in)
	}
	return out, nil
}

func checkAbs(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%q is not an absolute path", p)
	}
	return nil
}

// splitPaths splits a list of paths as PATH is (":", ";" on Windows); an
// empty element is an error, not the current directory.
func splitPaths(s string) ([]string, error) {
	list := filepath.SplitList(s)
	for i, p := range list {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("element %d of %q is empty (a path list has no empty elements; remove the extra %q)", i+1, s, string(filepath.ListSeparator))
		}
	}
	return list, nil
}

// splitCommands splits comma-separated command prefixes; "none" is the
// empty list.
func splitCommands(s string) ([]string, error) {
	if strings.TrimSpace(s) == "none" {
		return []string{}, nil
	}
	list := []string{}
	for i, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, fmt.Errorf("element %d of %q is empty (a comma-separated list has no empty elements; use \"none\" for no host commands)", i+1, s)
		}
		list = append(list, h)
	}
	return list, nil
}

// splitNames splits names or globs separated by commas and/or white space.
func splitNames(s string) ([]string, error) {
	list := []string{}
	for i, part := range strings.Split(s, ",") {
		names := strings.Fields(part)
		if len(names) == 0 {
			return nil, fmt.Errorf("element %d of %q is empty (a comma-separated list has no empty elements)", i+1, s)
		}
		list = append(list, names...)
	}
	return list, nil
}

func narrowerLimit(cur, v any) bool {
	return narrower(asInt64(v), asInt64(cur))
}

func asInt64(v any) int64 {
	switch x := v.(type) {
	case time.Duration:
		return int64(x)
	case int64:
		return x
	}
	panic(fmt.Sprintf("config: limit of type %T", v))
}

func subset(cur, v any) bool {
	for _, s := range v.([]string) {
		if !contains(cur.([]string), s) {
			return false
		}
	}
	return true
}

func always(_, _ any) bool { return true }

// checkProxyURL accepts http://HOST:PORT and nothing more: no user or
// password (the proxy takes none), no path, query or fragment.
func checkProxyURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not http://HOST:PORT", s)
	}
	if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %s is out of range (1 to 65535)", s, u.Port())
	}
	return nil
}
