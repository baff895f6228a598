package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	user := writeFile(t, "network = \"host\"\nidle_ttl = \"10m\"\nmemory = \"2GiB\"\npids = 100\ncode_dirs = [\"/a\"]\n")
	project := writeFile(t, "idle_ttl = 60\nmemory = \"1GiB\"\n")
	cfg, err := Load(Sources{UserFile: user, ProjectFile: project, Env: []string{"SBX_PIDS=70", "AGENT_SANDBOX_CODE_DIRS=/x:/y", "AGENT_SANDBOX_HOST_COMMANDS=git push, gh pr create"}})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Backend: "local", Network: "host", IdleTTL: time.Minute, Memory: 1 << 30, Pids: 70, CodeDirs: []string{"/x", "/y"}}
	if cfg.Backend != want.Backend || cfg.Network != want.Network || cfg.IdleTTL != want.IdleTTL || cfg.Memory != want.Memory || cfg.Pids != want.Pids || strings.Join(cfg.CodeDirs, ",") != "/x,/y" || strings.Join(cfg.HostCommands, ",") != "git push,gh pr create" {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
}

func TestJournalSize(t *testing.T) {
	if d := Defaults().JournalSize; d != 1<<30 {
		t.Fatalf("default journal_size %d, want 1GiB", d)
	}
	user := writeFile(t, "journal_size = \"2GiB\"\n")
	cfg, err := Load(Sources{UserFile: user, Env: []string{}})
	if err != nil || cfg.JournalSize != 2<<30 {
		t.Fatalf("user file: %d %v", cfg.JournalSize, err)
	}
	cfg, err = Load(Sources{UserFile: user, Env: []string{"SBX_JOURNAL_SIZE=64MiB"}})
	if err != nil || cfg.JournalSize != 64<<20 {
		t.Fatalf("environment: %d %v", cfg.JournalSize, err)
	}
}

func TestDefaultsWithoutFiles(t *testing.T) {
	cfg, err := Load(Sources{UserFile: filepath.Join(t.TempDir(), "none.toml"), Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Backend != "local" || cfg.Network != "none" || cfg.IdleTTL != 30*time.Minute || cfg.Timeout != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		user     string
		project  string
		env      []string
		wantLine int
		wantKey  string
		wantMsg  string
	}{
		{name: "syntax error", user: "a = \n", wantLine: 1, wantMsg: ""},
		{name: "unknown key", user: "network = \"none\"\n\nbogus = 1\n", wantLine: 3, wantKey: "bogus", wantMsg: "unknown key"},
		{name: "unknown table key", user: "[x]\ny = 1\n", wantKey: "x", wantMsg: "unknown key"},
		{name: "bad network", user: "network = \"wifi\"\n", wantLine: 1, wantKey: "network", wantMsg: "network must be"},
		{name: "bad backend", user: "backend = \"docker\"\n", wantLine: 1, wantKey: "backend", wantMsg: "unknown backend"},
		{name: "bad duration", user: "\nidle_ttl = \"forever\"\n", wantLine: 2, wantKey: "idle_ttl", wantMsg: "not a duration"},
		{name: "negative duration", user: "timeout = -5\n", wantLine: 1, wantKey: "timeout", wantMsg: "out of range"},
		{name: "bad size", user: "memory = \"lots\"\n", wantLine: 1, wantKey: "memory", wantMsg: "not a size"},
		{name: "wrong type", user: "pids = \"many\"\n", wantLine: 1, wantMsg: ""},
		{name: "negative pids", user: "pids = -1\n", wantLine: 1, wantKey: "pids", wantMsg: "not a process count"},
		{name: "pids below the floor", user: "pids = 16\n", wantLine: 1, wantKey: "pids", wantMsg: "below 64"},
		{name: "project sets backend", project: "backend = \"local\"\n", wantLine: 1, wantKey: "backend", wantMsg: "may only narrow"},
		{name: "project opens network", project: "network = \"host\"\n", wantLine: 1, wantKey: "network", wantMsg: "may only narrow"},
		{name: "project sets code dirs", project: "code_dirs = [\"/\"]\n", wantLine: 1, wantKey: "code_dirs", wantMsg: "may only narrow"},
		{name: "project raises memory", project: "memory = \"64GiB\"\n", wantLine: 1, wantKey: "memory", wantMsg: "may only narrow"},
		{name: "project lifts memory limit", project: "memory = 0\n", wantLine: 1, wantKey: "memory", wantMsg: "may only narrow"},
		{name: "project raises idle ttl", project: "idle_ttl = \"2h\"\n", wantLine: 1, wantKey: "idle_ttl", wantMsg: "may only narrow"},
		{name: "project raises pids", project: "pids = 100000\n", wantLine: 1, wantKey: "pids", wantMsg: "may only narrow"},
		{name: "project shrinks the journal", project: "journal_size = 0\n", wantLine: 1, wantKey: "journal_size", wantMsg: "may only narrow"},
		{name: "bad journal size", user: "journal_size = \"big\"\n", wantLine: 1, wantKey: "journal_size", wantMsg: "not a size"},
		{name: "project adds a host command", project: "host_commands = [\"git push\", \"make\"]\n", wantLine: 1, wantKey: "host_commands", wantMsg: "may only narrow"},
		{name: "bad host commands", user: "host_commands = \"git push\"\n", wantLine: 1, wantKey: "host_commands", wantMsg: "want a list"},
		{name: "project forwards a variable", project: "forward_env = [\"AWS_*\"]\n", wantLine: 1, wantKey: "forward_env", wantMsg: "may only narrow"},
		{name: "project adds a sync path", project: "sync_paths = [\"/root/.ssh\"]\n", wantLine: 1, wantKey: "sync_paths", wantMsg: "may only narrow"},
		{name: "relative sync path", user: "sync_paths = [\"npmrc\"]\n", wantLine: 1, wantKey: "sync_paths", wantMsg: "not an absolute path"},
		{name: "bad env", env: []string{"SBX_NETWORK=lan"}, wantKey: "SBX_NETWORK", wantMsg: "network must be"},
		{name: "bad env duration", env: []string{"AGENT_SANDBOX_IDLE_TTL=x"}, wantKey: "AGENT_SANDBOX_IDLE_TTL", wantMsg: "not a duration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := Sources{UserFile: filepath.Join(t.TempDir(), "none.toml"), Env: c.env}
			if c.user != "" {
				src.UserFile = writeFile(t, c.user)
			}
			if c.project != "" {
				src.ProjectFile = writeFile(t, c.project)
			}
			_, err := Load(src)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("want a *config.Error, got %v", err)
			}
			if c.wantLine != 0 && ce.Line != c.wantLine {
				t.Errorf("line %d, want %d (%v)", ce.Line, c.wantLine, err)
			}
			if ce.Key != c.wantKey && c.wantKey != "" {
				t.Errorf("key %q, want %q (%v)", ce.Key, c.wantKey, err)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error %q does not say %q", err, c.wantMsg)
			}
			if c.user != "" && !strings.Contains(err.Error(), src.UserFile) && ce.Source != "environment" {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestProjectMayNarrow(t *testing.T) {
	project := writeFile(t, "network = \"none\"\nidle_ttl = \"5m\"\nmemory = \"512MiB\"\npids = 64\ntimeout = \"10m\"\nhost_commands = [\"git push\"]\n")
	cfg, err := Load(Sources{UserFile: filepath.Join(t.TempDir(), "none.toml"), ProjectFile: project, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IdleTTL != 5*time.Minute || cfg.Memory != 512<<20 || cfg.Pids != 64 || cfg.Timeout != 10*time.Minute || len(cfg.HostCommands) != 1 {
		t.Fatalf("narrowing not applied: %+v", cfg)
	}
}

func TestParseSizeAndDuration(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "4GiB": 4 << 30, "512MiB": 512 << 20, "1G": 1 << 30, "10KB": 10000, "3 MiB": 3 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5G", "GiB", "99999999999999999999"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "30m": 30 * time.Minute, "1h30m": 90 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "soon", "-5m", "-3"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func FuzzLoad(f *testing.F) {
	for _, seed := range []string{"network = \"none\"\n", "memory = \"4GiB\"\npids = 3\n", "[x]\n", "idle_ttl = 60\n", "a = [\n", "[cluster]\npool = \"p\"\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content string) {
		p := filepath.Join(t.TempDir(), "c.toml")
		os.WriteFile(p, []byte(content), 0o644)
		cfg, err := Load(Sources{UserFile: filepath.Join(t.TempDir(), "none.toml"), ProjectFile: p, Env: []string{}})
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// An untrusted project file never widens the defaults.
		d := Defaults()
		if len(cfg.ForwardEnv) > 0 || len(cfg.SyncPaths) > 0 || len(cfg.TaskFiles) > 0 {
			t.Fatalf("project file forwarded something: %+v", cfg)
		}
		for _, h := range cfg.HostCommands {
			if !contains(d.HostCommands, h) {
				t.Fatalf("project file added host command %q", h)
			}
		}
		if cfg.Backend != d.Backend || cfg.Network != "none" || cfg.CodeDirs != nil || cfg.Cluster != d.Cluster ||
			!narrower(cfg.Memory, d.Memory) || !narrower(int64(cfg.Pids), int64(d.Pids)) || !narrower(int64(cfg.IdleTTL), int64(d.IdleTTL)) {
			t.Fatalf("project file widened the config: %+v", cfg)
		}
	})
}
