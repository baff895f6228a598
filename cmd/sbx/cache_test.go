package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The caches sessions share: a file one session writes into GOMODCACHE is
// there for the next; cache = "session" keeps sessions apart; sbx cache ls
// shows the size and prune removes them.
func TestCacheSharedSessionLsPrune(t *testing.T) {
	w := newWorld(t)
	cacheHome := tempDir(t)
	env := []string{"XDG_CACHE_HOME=" + cacheHome}
	if r := w.sbxEnv(t, w.code, env, "exec", "--session", "c1", "--", `head -c 5000 /dev/zero > "$GOMODCACHE/blob" && echo "$npm_config_cache $PIP_CACHE_DIR $CARGO_HOME $GOCACHE"`); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "/home/sbx/.npm /home/sbx/.cache/pip /home/sbx/.cargo /home/sbx/.cache/go-build" {
		t.Fatalf("first session: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, env, "exec", "--session", "c2", "--", `wc -c < "$GOMODCACHE/blob"`); r.code != 0 || strings.TrimSpace(r.stdout) != "5000" {
		t.Fatalf("second session does not see the shared cache: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, append(env, "SBX_CACHE=session"), "exec", "--session", "c3", "--", `test ! -e "$GOMODCACHE/blob"`); r.code != 0 {
		t.Fatalf("cache = session sees the shared cache: %d %q", r.code, r.stderr)
	}
	r := w.sbxEnv(t, w.code, env, "cache", "ls")
	if r.code != 0 || !regexp.MustCompile(`go-mod\s+4\.9 KiB\s+1\s`).MatchString(r.stdout) {
		t.Fatalf("sbx cache ls:\n%s%s", r.stdout, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, env, "cache", "prune", "--older-than", "1d"); r.code != 0 || !strings.Contains(r.stdout, "nothing to remove") {
		t.Fatalf("prune --older-than 1d removed a cache used now: %s", r.stdout)
	}
	if r := w.sbxEnv(t, w.code, env, "cache", "prune", "--older-than", "soon"); r.code == 0 || !strings.Contains(r.stderr, "--older-than") {
		t.Fatalf("bad --older-than: %d %q", r.code, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, env, "cache", "prune"); r.code != 0 || !strings.Contains(r.stdout, "removed") {
		t.Fatalf("prune: %d %s %s", r.code, r.stdout, r.stderr)
	}
	matches, _ := filepath.Glob(filepath.Join(cacheHome, "sbx", "*", "go-mod", "blob"))
	matches2, _ := filepath.Glob(filepath.Join(cacheHome, "sbx", "go-mod", "blob"))
	if len(matches)+len(matches2) != 0 {
		t.Fatalf("prune left %v %v", matches, matches2)
	}
	if _, err := os.Stat(filepath.Join(cacheHome, "sbx")); err != nil {
		t.Fatal(err)
	}
}
