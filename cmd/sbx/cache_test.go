package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The caches sessions share: a file one session writes into GOMODCACHE is
// there for the next; cache = "session" keeps sessions apart; sbx cache ls
// shows the size and prune removes them.
//
// As root each sandbox runs as a host uid of its own and the caches are per
// uid slot (docs/security.md), so which sessions share depends on the slots
// free at the time: the test runs sbx as an ordinary user then, whose
// sessions all share one cache.
func TestCacheSharedSessionLsPrune(t *testing.T) {
	w := newWorld(t)
	cacheHome := tempDir(t)
	env := []string{"XDG_CACHE_HOME=" + cacheHome}
	sbxAs := ordinaryUser(t, w, cacheHome)
	if r := sbxAs(t, w.code, env, "exec", "--session", "c1", "--", `head -c 5000 /dev/zero > "$GOMODCACHE/blob" && echo "$npm_config_cache $PIP_CACHE_DIR $CARGO_HOME $GOCACHE"`); r.code != 0 ||
		strings.TrimSpace(r.stdout) != "/home/sbx/.npm /home/sbx/.cache/pip /home/sbx/.cargo /home/sbx/.cache/go-build" {
		t.Fatalf("first session: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "exec", "--session", "c2", "--", `wc -c < "$GOMODCACHE/blob"`); r.code != 0 || strings.TrimSpace(r.stdout) != "5000" {
		t.Fatalf("second session does not see the shared cache: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, append(env, "SBX_CACHE=session"), "exec", "--session", "c3", "--", `test ! -e "$GOMODCACHE/blob"`); r.code != 0 {
		t.Fatalf("cache = session sees the shared cache: %d %q", r.code, r.stderr)
	}
	r := sbxAs(t, w.code, env, "cache", "ls")
	if r.code != 0 || !regexp.MustCompile(`go-mod\s+4\.9 KiB\s+1\s`).MatchString(r.stdout) {
		t.Fatalf("sbx cache ls:\n%s%s", r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "cache", "prune", "--older-than", "1d"); r.code != 0 || !strings.Contains(r.stdout, "nothing to remove") {
		t.Fatalf("prune --older-than 1d removed a cache used now: %s", r.stdout)
	}
	if r := sbxAs(t, w.code, env, "cache", "prune", "--older-than", "soon"); r.code == 0 || !strings.Contains(r.stderr, "--older-than") {
		t.Fatalf("bad --older-than: %d %q", r.code, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "cache", "prune"); r.code != 0 || !strings.Contains(r.stdout, "removed") {
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

// ordinaryUser runs sbx as the world's user: when the tests run as root,
// as uid 65534 (setpriv), whose sessions share one cache (as root each
// sandbox has a host uid, and caches, of its own slot). extra dirs are
// given to that user too.
func ordinaryUser(t *testing.T, w *world, extra ...string) func(t *testing.T, dir string, env []string, args ...string) result {
	if os.Getuid() != 0 {
		return func(t *testing.T, dir string, env []string, args ...string) result {
			return w.sbxEnv(t, dir, env, args...)
		}
	}
	for _, d := range append([]string{w.home, w.state, w.code}, extra...) {
		exec.Command("chown", "-R", "65534:65534", d).Run()
	}
	run := func(t *testing.T, dir string, env []string, args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", sbxBin}, args...)...)
		cmd.Dir, cmd.Env = dir, append(append([]string{}, w.env...), env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("setpriv sbx %v: %v (the test needs setpriv, util-linux)", args, err)
		}
		return result{stdout.String(), stderr.String(), code}
	}
	t.Cleanup(func() { run(t, w.code, nil, "release", "--all") })
	return run
}
