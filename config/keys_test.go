package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README's configuration table says what the key table does: the same
// keys in the same order, defaults, variables (in order: the later wins)
// and flags.
func TestREADMETable(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "## Configuration\n")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	envName := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	flagName := regexp.MustCompile("`(--[a-z-]+)`")
	var names []string
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 5 {
			t.Fatalf("README row has %d cells, want 5: %s", len(cells), line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		names = append(names, name)
		k := Lookup(name)
		if k == nil {
			t.Errorf("README documents key %q, which config.Keys does not have", name)
			continue
		}
		if got := strings.ReplaceAll(strings.TrimSpace(cells[1]), "`", ""); got != k.Default {
			t.Errorf("%s: README default %q, table %q", name, got, k.Default)
		}
		var env []string
		for _, m := range envName.FindAllStringSubmatch(cells[2], -1) {
			env = append(env, m[1])
		}
		if !reflect.DeepEqual(env, k.Env) {
			t.Errorf("%s: README variables %q, table %q", name, env, k.Env)
		}
		flag := ""
		if m := flagName.FindStringSubmatch(cells[3]); m != nil {
			flag = m[1]
		}
		if flag != k.Flag {
			t.Errorf("%s: README flag %q, table %q", name, flag, k.Flag)
		}
	}
	var want []string
	for _, k := range Keys {
		want = append(want, k.Name)
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("README keys %q,\nwant (config.Keys) %q", names, want)
	}
}

// Each key's documented default is what Defaults holds.
func TestKeyDefaults(t *testing.T) {
	d := Defaults()
	for _, k := range Keys {
		got := k.get(&d)
		switch k.Name {
		case "code_dirs", "exclude", "cluster.kubeconfig", "cluster.context", "cluster.pool":
			// Decided elsewhere (the git top level, .sbxignore) or by
			// the backend (client-go's rules); the config's value is zero.
			if !reflect.ValueOf(got).IsZero() {
				t.Errorf("%s: default %v, want the zero value", k.Name, got)
			}
			continue
		}
		if k.Default == "none" {
			if !reflect.ValueOf(got).IsZero() {
				t.Errorf("%s: documented none, default %v", k.Name, got)
			}
			continue
		}
		want, err := k.parse(text(strings.Trim(k.Default, `"`)))
		if err != nil {
			t.Errorf("%s: documented default %q does not parse: %v", k.Name, k.Default, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: default %v, documented %q (%v)", k.Name, got, k.Default, want)
		}
		if k.Sources&ProjectFileSource != 0 && (k.narrows == nil || k.Narrow == "") {
			t.Errorf("%s: the project may set it but the table says not how it narrows", k.Name)
		}
	}
}

// The rules that drifted between the file and the environment: one per
// row, each through Load.
func TestSameRulesEverySource(t *testing.T) {
	none := func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.toml") }
	for _, c := range []struct {
		name    string
		user    string
		project string
		env     []string
		check   func(Config) bool
	}{
		{name: "env_skip from the environment adds to the file's", user: "env_skip = [\"A\"]\n", env: []string{"SBX_ENV_SKIP=B, C"},
			check: func(c Config) bool { return strings.Join(c.EnvSkip, ",") == "A,B,C" }},
		{name: "exclude from the environment adds to the files'", user: "exclude = [\"a\"]\n", project: "exclude = [\"b\"]\n", env: []string{"SBX_EXCLUDE=c d"},
			check: func(c Config) bool { return strings.Join(c.Exclude, ",") == "a,b,c,d" }},
		{name: "forward_env from the environment replaces the file's", user: "forward_env = [\"A\"]\n", env: []string{"SBX_FORWARD_ENV=B"},
			check: func(c Config) bool { return strings.Join(c.ForwardEnv, ",") == "B" }},
		{name: "the later of two variables wins", env: []string{"SBX_IDLE_TTL=5m", "AGENT_SANDBOX_IDLE_TTL=7m"},
			check: func(c Config) bool { return c.IdleTTL == 5*time.Minute }},
		{name: "cluster keys from the user's table", user: "[cluster]\npool = \"p\"\nnamespace = \"team\"\nclaim_timeout = 30\npersistent = true\n",
			check: func(c Config) bool {
				return c.Cluster == Cluster{Pool: "p", Namespace: "team", ClaimTimeout: 30 * time.Second, Persistent: true}
			}},
		{name: "cluster keys from the environment over the file", user: "cluster.pool = \"p\"\n",
			env: []string{"AGENT_SANDBOX_POOL=q", "AGENT_SANDBOX_CLAIM_TIMEOUT=3m", "AGENT_SANDBOX_KUBECONFIG=/k", "AGENT_SANDBOX_CONTEXT=ctx", "AGENT_SANDBOX_PERSISTENT=true"},
			check: func(c Config) bool {
				return c.Cluster == Cluster{Pool: "q", Namespace: "sbx", ClaimTimeout: 3 * time.Minute, Kubeconfig: "/k", Context: "ctx", Persistent: true}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := Sources{UserFile: none(t), Env: c.env}
			if c.user != "" {
				src.UserFile = writeFile(t, c.user)
			}
			if c.project != "" {
				src.ProjectFile = writeFile(t, c.project)
			}
			if src.Env == nil {
				src.Env = []string{}
			}
			cfg, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Fatalf("got %+v", cfg)
			}
		})
	}
	for _, c := range []struct {
		name, project, env, key, msg string
	}{
		{name: "an empty code dir", env: "SBX_CODE_DIRS=/a:", key: "SBX_CODE_DIRS", msg: "element 2 of \"/a:\" is empty"},
		{name: "an empty code dir first", env: "AGENT_SANDBOX_CODE_DIRS=:/a", key: "AGENT_SANDBOX_CODE_DIRS", msg: "is empty"},
		{name: "an empty sync path", env: "SBX_SYNC_PATHS=/a::/b", key: "SBX_SYNC_PATHS", msg: "is empty"},
		{name: "an empty host command", env: "SBX_HOST_COMMANDS=git push,,git fetch", key: "SBX_HOST_COMMANDS", msg: "is empty"},
		{name: "an empty forwarded name", env: "SBX_FORWARD_ENV=A,", key: "SBX_FORWARD_ENV", msg: "is empty"},
		{name: "an empty exclude", env: "SBX_EXCLUDE=a,,b", key: "SBX_EXCLUDE", msg: "is empty"},
		{name: "a relative task file", env: "SBX_TASK_FILES=task.md", key: "SBX_TASK_FILES", msg: "not an absolute path"},
		{name: "a zero claim timeout", env: "AGENT_SANDBOX_CLAIM_TIMEOUT=0", key: "AGENT_SANDBOX_CLAIM_TIMEOUT", msg: "positive"},
		{name: "a bad persistent", env: "AGENT_SANDBOX_PERSISTENT=maybe", key: "AGENT_SANDBOX_PERSISTENT", msg: "true or false"},
		{name: "the project names a pool", project: "[cluster]\npool = \"evil\"\n", key: "cluster.pool", msg: "may only narrow"},
		{name: "the project names a kubeconfig", project: "cluster.kubeconfig = \"/tmp/k\"\n", key: "cluster.kubeconfig", msg: "may only narrow"},
		{name: "an unknown cluster key", project: "[cluster]\nbogus = 1\n", key: "cluster.bogus", msg: "unknown key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := Sources{UserFile: none(t), Env: []string{}}
			if c.env != "" {
				src.Env = []string{c.env}
			}
			if c.project != "" {
				src.ProjectFile = writeFile(t, c.project)
			}
			_, err := Load(src)
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want a *config.Error naming %s and saying %q", err, c.key, c.msg)
			}
		})
	}
}

// Flags go through the same parsers, and name the flag when refused.
func TestFlags(t *testing.T) {
	cfg := Defaults()
	if err := cfg.SetFlag("--timeout", "90"); err != nil || cfg.Timeout != 90*time.Second {
		t.Fatalf("--timeout 90: %v %v", cfg.Timeout, err)
	}
	if err := cfg.SetFlagList("--code-dir", []string{"/a", "/b"}); err != nil || strings.Join(cfg.CodeDirs, ",") != "/a,/b" {
		t.Fatalf("--code-dir: %v %v", cfg.CodeDirs, err)
	}
	for _, c := range []struct {
		flag string
		list []string
		v    string
	}{{flag: "--code-dir", list: []string{"/a", ""}}, {flag: "--host-command", list: []string{" "}}, {flag: "--disk", v: "lots"}, {flag: "--memory", v: "1G"}} {
		var err error
		if c.list != nil {
			err = cfg.SetFlagList(c.flag, c.list)
		} else {
			err = cfg.SetFlag(c.flag, c.v)
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Source != "flags" || ce.Key != c.flag {
			t.Errorf("%s %q %q: got %v, want a flags error naming it", c.flag, c.list, c.v, err)
		}
	}
}
