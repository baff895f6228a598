package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlanSharedSessionNone(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	uid, gid := os.Geteuid(), os.Getegid()
	ms, env, err := Plan(Config{Mode: "shared", Root: root}, state, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(Kinds) {
		t.Fatalf("mounts %v", ms)
	}
	for i, k := range Kinds {
		if ms[i].Source != filepath.Join(root, k.Name) || ms[i].Target != k.Target || ms[i].ReadOnly {
			t.Errorf("mount %d = %+v", i, ms[i])
		}
		if _, err := os.Stat(stampOf(ms[i].Source)); err != nil {
			t.Errorf("%s: no use stamp: %v", k.Name, err)
		}
	}
	joined := strings.Join(env, " ")
	for _, v := range []string{"GOMODCACHE=/home/sbx/go/pkg/mod", "GOCACHE=/home/sbx/.cache/go-build", "npm_config_cache=/home/sbx/.npm", "PIP_CACHE_DIR=/home/sbx/.cache/pip", "CARGO_HOME=/home/sbx/.cargo"} {
		if !strings.Contains(joined, v) {
			t.Errorf("env lacks %s: %s", v, joined)
		}
	}
	ms, _, err = Plan(Config{Mode: "session", Root: root}, state, uid, gid)
	if err != nil || !strings.HasPrefix(ms[0].Source, filepath.Join(state, "cache")) {
		t.Fatalf("session mode: %v %v", ms, err)
	}
	ms, env, err = Plan(Config{Mode: "none", Root: root}, state, uid, gid)
	if err != nil || len(ms) != 0 || len(env) != 0 {
		t.Fatalf("none: %v %v %v", ms, env, err)
	}
	// Another uid (sbx as root) gets caches of its own.
	if os.Geteuid() == 0 {
		ms, _, err = Plan(Config{Mode: "shared", Root: root}, state, 1_000_000_123, 1_000_000_123)
		if err != nil || !strings.Contains(ms[0].Source, "uid-1000000123") {
			t.Fatalf("other uid: %v %v", ms, err)
		}
		if fi, _ := os.Stat(ms[0].Source); fi == nil || !ownedBy(fi, 1_000_000_123) {
			t.Fatalf("the other uid's cache is not its own")
		}
	}
}

func TestHostGoMod(t *testing.T) {
	mod := t.TempDir()
	if _, _, err := Plan(Config{Mode: "none", HostCaches: []string{"go-mod"}, HostGoModCache: mod}, t.TempDir(), 0, 0); err == nil || !strings.Contains(err.Error(), "host_caches: go-mod") {
		t.Fatalf("missing cache/download: %v", err)
	}
	os.MkdirAll(filepath.Join(mod, "cache", "download"), 0o755)
	ms, env, err := Plan(Config{Mode: "none", HostCaches: []string{"go-mod"}, HostGoModCache: mod, HostGoProxy: "https://mirror.invalid"}, t.TempDir(), os.Geteuid(), os.Getegid())
	if err != nil || len(ms) != 1 || !ms[0].ReadOnly || ms[0].Target != HostGoModTarget || env[0] != "GOPROXY=file://"+HostGoModTarget+",https://mirror.invalid" {
		t.Fatalf("%v %v %v", ms, env, err)
	}
}

func TestListPrune(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	uid, gid := os.Geteuid(), os.Getegid()
	if _, _, err := Plan(Config{Mode: "shared", Root: root}, state, uid, gid); err != nil {
		t.Fatal(err)
	}
	// A Go module cache's read-only directory and file.
	mod := filepath.Join(root, "go-mod", "example.com", "m@v1.0.0")
	os.MkdirAll(mod, 0o755)
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/m\n"), 0o444)
	os.Chmod(mod, 0o555)
	os.WriteFile(filepath.Join(root, "npm", "blob"), make([]byte, 1000), 0o644)
	list, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, e := range list {
		sizes[e.Name] = e.Bytes
	}
	if sizes["npm"] != 1000 || sizes["go-mod"] != int64(len("module example.com/m\n")) || len(list) != len(Kinds) {
		t.Fatalf("list %+v", list)
	}
	// npm unused for two days: pruned by --older-than 1d; go-mod just used.
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(stampOf(filepath.Join(root, "npm")), old, old)
	removed, err := Prune(root, time.Now().Add(-24*time.Hour))
	if err != nil || len(removed) != 1 || removed[0].Name != "npm" {
		t.Fatalf("prune --older-than: %+v %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(root, "npm")); !os.IsNotExist(err) {
		t.Fatalf("npm still there: %v", err)
	}
	removed, err = Prune(root, time.Time{})
	if err != nil || len(removed) != len(Kinds)-1 {
		t.Fatalf("prune all: %+v %v", removed, err)
	}
	if _, err := os.Stat(mod); !os.IsNotExist(err) {
		t.Fatalf("the read-only module directory survived: %v", err)
	}
}

// A symlink planted in a cache (by a sandbox) does not lead prune's chmods
// to the host file it names.
func TestPruneSymlinkAttack(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	if _, _, err := Plan(Config{Mode: "shared", Root: root}, state, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.Mkdir(secret, 0o500)
	os.Symlink(secret, filepath.Join(root, "cache", "link"))
	if _, err := Prune(root, time.Time{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(secret)
	if err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("the symlink's target changed: %v %v", fi.Mode(), err)
	}
}

// TestWithoutCredentials: the host's GOPROXY as it enters the sandbox.
func TestWithoutCredentials(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"the default", "https://proxy.golang.org,direct", "https://proxy.golang.org,direct"},
		{"off", "off", "off"},
		{"a user and a token", "https://alice:s3cret@proxy.corp.example/go,direct", "https://proxy.corp.example/go,direct"},
		{"a user only, after a pipe", "https://a.example|https://bob@b.example/x", "https://a.example|https://b.example/x"},
		{"an escaped @ in the token", "https://u:p%40ss@h.example", "https://h.example"},
		{"an entry with @ that is no URL", "not a url@x,direct", "direct"},
		{"the first entry left out", "u@,https://c.example", "https://c.example"},
		{"an IPv6 proxy", "http://u:p@[::1]:3000/,off", "http://[::1]:3000/,off"},
		{"a file proxy", "file:///srv/mods,direct", "file:///srv/mods,direct"},
	} {
		if got := withoutCredentials(tc.in); got != tc.want {
			t.Errorf("%s: %q -> %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}
