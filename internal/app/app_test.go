package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// project makes a home, a user config holding userConfig, a state dir and
// a git working tree, and makes the tree the current directory.
func project(t *testing.T, userConfig string) string {
	t.Helper()
	base := t.TempDir()
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	for _, d := range []string{"home", "config/sbx", "state", "code/.git"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "config/sbx/config.toml"), []byte(userConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(base, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(base, "config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(base, "state"))
	for _, k := range []string{"SBX_BACKEND", "AGENT_SANDBOX_BACKEND", "SBX_CODE_DIRS", "AGENT_SANDBOX_PERSISTENT", "SBX_SYNC_PATHS", "AGENT_SANDBOX_SYNC_PATHS", "SBX_JOURNAL_SIZE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	code := filepath.Join(base, "code")
	t.Chdir(code)
	return code
}

// sbx exec appended the task files into the config's own sync_paths
// array: the session's list and the config's shared their elements.
func TestSyncPathsOwnArray(t *testing.T) {
	project(t, "sync_paths = [\"/etc/a\", \"/etc/b\", \"/etc/c\"]\ntask_files = [\"/etc/t\"]\n")
	for _, kind := range []Kind{PerCommand, Server} {
		e, err := Setup(Flags{}, kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(e.Params.SyncPaths, ","); got != "/etc/a,/etc/b,/etc/c,/etc/t" {
			t.Fatalf("kind %d: sync paths %s, want the config's then the task files", kind, got)
		}
		e.Params.SyncPaths[0] = "changed"
		if e.Config.SyncPaths[0] != "/etc/a" {
			t.Fatalf("kind %d: the session's sync paths share the config's array: the config now says %q", kind, e.Config.SyncPaths[0])
		}
	}
}

// sbx-mcp left the journal size out of its sessions' Params, so
// journal_size = 0 (keep no content) did not reach them.
func TestJournalSizeBothKinds(t *testing.T) {
	project(t, "journal_size = 0\n")
	for _, kind := range []Kind{PerCommand, Server} {
		e, err := Setup(Flags{}, kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Params.JournalSize != -1 || e.Manager.Params.JournalSize != -1 {
			t.Fatalf("kind %d: journal size %d (manager %d), want -1 (no content) for journal_size = 0", kind, e.Params.JournalSize, e.Manager.Params.JournalSize)
		}
	}
}

// --disk reached the sessions' Params but not the manager's (what release
// uses to pull back a session found by name).
func TestDiskFlagReachesManager(t *testing.T) {
	project(t, "")
	e, err := Setup(Flags{Disk: "1MiB"}, PerCommand, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Params.Limits.DiskBytes != 1<<20 || e.Manager.Params.Limits.DiskBytes != 1<<20 {
		t.Fatalf("disk %d (manager %d), want 1MiB from --disk", e.Params.Limits.DiskBytes, e.Manager.Params.Limits.DiskBytes)
	}
	if _, err := Setup(Flags{Disk: "lots"}, PerCommand, nil); err == nil || !strings.Contains(err.Error(), "--disk") {
		t.Fatalf("--disk lots: %v, want an error naming --disk", err)
	}
}

// A command runs where the user is; a server started outside the code dirs
// starts its commands in the first one.
func TestOutsideCodeDir(t *testing.T) {
	code := project(t, "")
	other := t.TempDir()
	if _, err := Setup(Flags{CodeDirs: []string{other}}, PerCommand, nil); err == nil || !strings.Contains(err.Error(), "not inside a code dir") {
		t.Fatalf("sbx exec outside its code dir: %v, want the not-inside error", err)
	}
	e, err := Setup(Flags{CodeDirs: []string{other}}, Server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(other); e.StartDir != real {
		t.Fatalf("server start dir %s, want the code dir %s", e.StartDir, real)
	}
	e, err = Setup(Flags{}, Server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.StartDir != code || len(e.Params.CodeDirs) != 1 || e.Params.CodeDirs[0] != code {
		t.Fatalf("server in %s: start %s, code dirs %v", code, e.StartDir, e.Params.CodeDirs)
	}
}

// A persistent cluster session is kept by either kind; only a process per
// command gets the relay.
func TestClusterKeepAndRelay(t *testing.T) {
	project(t, "")
	t.Setenv("AGENT_SANDBOX_PERSISTENT", "true")
	for _, kind := range []Kind{PerCommand, Server} {
		e, err := Setup(Flags{Backend: "cluster"}, kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !e.Params.Keep {
			t.Fatalf("kind %d: a persistent cluster session is not kept", kind)
		}
		if e.Provider.Name() != "cluster" {
			t.Fatalf("kind %d: backend %s, want cluster", kind, e.Provider.Name())
		}
		_, cfg, err := NewClusterProvider(kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Relay != (kind == PerCommand) {
			t.Fatalf("kind %d: relay %v", kind, cfg.Relay)
		}
	}
	t.Setenv("AGENT_SANDBOX_PERSISTENT", "false")
	for _, keep := range []bool{false, true} {
		e, err := Setup(Flags{Backend: "cluster", Keep: keep}, PerCommand, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Params.Keep != keep {
			t.Fatalf("--keep=%v on a non-persistent cluster: keep %v", keep, e.Params.Keep)
		}
	}
	e, err := Setup(Flags{}, PerCommand, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Params.Keep || e.Provider.Name() != "local" {
		t.Fatalf("local default: keep %v, backend %s", e.Params.Keep, e.Provider.Name())
	}
}
