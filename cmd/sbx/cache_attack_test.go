package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestHostGoModCacheReadOnly: host_caches = ["go-mod"] shows the host's own
// Go module cache to the sandbox. The host's go trusts what is there: a zip
// with a .ziphash naming the true hash is extracted when the host next
// needs that version, unchecked against the zip's bytes, and the host then
// builds and runs it. So the sandbox must not change it by any means a
// command has: writing, appending, truncating, chmod, creating, renaming,
// removing, linking, or remounting it read-write. sbx runs as an ordinary
// user here (uid 65534 when the tests run as root), the owner of the
// cache: the sandbox is that user on the host, so only the mount and its
// guards stand between it and the files.
func TestHostGoModCacheReadOnly(t *testing.T) {
	w := newWorld(t)
	modCache := tempDir(t)
	dl := filepath.Join(modCache, "cache", "download", "example.com", "m", "@v")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"list": "v1.0.0\n", "v1.0.0.zip": "the real zip\n", "v1.0.0.ziphash": "h1:real\n", "v1.0.0.mod": "module example.com/m\n"} {
		if err := os.WriteFile(filepath.Join(dl, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sbxAs := ordinaryUser(t, w, modCache)
	before := treeHash(t, modCache)
	env := []string{"GOMODCACHE=" + modCache, "SBX_HOST_CACHES=go-mod", "SBX_CACHE=none", "GOFLAGS=", "GOTOOLCHAIN=local"}
	// The mount is there and readable: the attacks below fail for the
	// mount's sake, not because nothing is there.
	r := sbxAs(t, w.code, env, "exec", "--", `echo "$GOPROXY"; cat /var/cache/sbx/host-go-mod/example.com/m/@v/v1.0.0.zip`)
	if r.code != 0 || !strings.Contains(r.stdout, "file:///var/cache/sbx/host-go-mod") || !strings.Contains(r.stdout, "the real zip") {
		t.Fatalf("the host's module cache is not shown to the sandbox: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	const d = "/var/cache/sbx/host-go-mod/example.com/m/@v"
	for _, attack := range []string{
		`echo planted > ` + d + `/v1.0.0.zip`,
		`echo planted >> ` + d + `/v1.0.0.ziphash`,
		`truncate -s 0 ` + d + `/list`,
		`chmod 0777 ` + d + ` ` + d + `/v1.0.0.zip`,
		`touch -d 2000-01-01 ` + d + `/v1.0.0.mod`,
		`echo planted > ` + d + `/v1.0.1.zip`,
		`mkdir -p /var/cache/sbx/host-go-mod/golang.org/toolchain/@v`,
		`mv ` + d + `/v1.0.0.zip ` + d + `/v1.0.0.zip.old`,
		`rm -f ` + d + `/v1.0.0.mod`,
		`ln -s /etc/passwd ` + d + `/v1.0.2.zip`,
		`ln ` + d + `/list ` + d + `/list2`,
		`mount -o remount,rw,bind /var/cache/sbx/host-go-mod && echo planted > ` + d + `/v1.0.0.zip`,
		`umount -l /var/cache/sbx/host-go-mod; ls /var/cache/sbx/host-go-mod/example.com`,
		`cd /var/cache/sbx && mv host-go-mod x`,
	} {
		r := sbxAs(t, w.code, env, "exec", "--", attack)
		if after := treeHash(t, modCache); after != before {
			t.Fatalf("the sandbox changed the host's Go module cache with %q (exit %d, %s)", attack, r.code, r.stderr)
		}
	}
}

// TestCachePruneFollowsNoPlantedLink: sbx cache prune runs on the host, as
// the user, over what sandboxes wrote. A sandbox plants, in the shared Go
// module cache, links to a host directory of the user's (it can guess the
// host's paths): one at the top, one inside a read-only directory as Go
// makes them (prune chmods those before removing), one that is the
// directory prune would chmod. Prune removes the cache and leaves the host
// directory, its mode and its files as they were.
func TestCachePruneFollowsNoPlantedLink(t *testing.T) {
	w := newWorld(t)
	cacheHome := tempDir(t)
	victim := filepath.Join(tempDir(t), "victim")
	if err := os.MkdirAll(filepath.Join(victim, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(victim, "sub", "keep"), []byte("keep\n"), 0o644)
	os.Chmod(filepath.Join(victim, "sub"), 0o500)
	os.Chmod(victim, 0o500)
	t.Cleanup(func() { os.Chmod(victim, 0o755); os.Chmod(filepath.Join(victim, "sub"), 0o755) })
	env := []string{"XDG_CACHE_HOME=" + cacheHome}
	sbxAs := ordinaryUser(t, w, cacheHome, filepath.Dir(victim))
	before := treeHash(t, victim)
	plant := `cd "$GOMODCACHE" && ln -s ` + victim + ` top && mkdir -p ro/m@v1 && ln -s ` + victim + ` ro/m@v1/in && ln -s ` + victim + `/sub ro/dirlink && chmod 0555 ro/m@v1 ro && ls -la ro`
	if r := sbxAs(t, w.code, env, "exec", "--", plant); r.code != 0 {
		t.Fatalf("plant: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "cache", "prune"); r.code != 0 || !strings.Contains(r.stdout, "removed") {
		t.Fatalf("sbx cache prune: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := treeHash(t, victim); after != before {
		t.Fatalf("sbx cache prune changed the host directory a planted link named")
	}
	if m, _ := filepath.Glob(filepath.Join(cacheHome, "sbx", "go-mod", "*")); len(m) != 0 {
		t.Fatalf("prune left %v", m)
	}
}

// TestHostGoEnvIgnoresTheProjectsGoMod: with host_caches = ["go-mod"] sbx
// asks the host's go for GOMODCACHE and GOPROXY. Asked in the project's
// directory, the go command read the go.mod there, which the sandbox
// writes: a `go 1.99.9` line made the host's go fetch toolchain go1.99.9
// from the host's GOPROXY and run it, on the host, before the sandbox
// started (the go command checks a toolchain against the checksum database
// even with GOSUMDB=off, so an official release, but one the sandbox chose,
// downloaded and run at every claim). sbx asks outside any module now; the
// proxy here records what is asked.
func TestHostGoEnvIgnoresTheProjectsGoMod(t *testing.T) {
	w := newWorld(t)
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		http.NotFound(rw, r)
	}))
	defer srv.Close()
	modCache := tempDir(t)
	os.MkdirAll(filepath.Join(modCache, "cache", "download"), 0o755)
	env := []string{"GOMODCACHE=" + modCache, "SBX_HOST_CACHES=go-mod", "SBX_CACHE=none", "GOPROXY=" + srv.URL, "GOSUMDB=off", "GOFLAGS=",
		// The official distribution's default (its go.env); some distributions' is local.
		"GOTOOLCHAIN=auto"}
	if r := w.sbxEnv(t, w.code, env, "exec", "--", `printf 'module example.com/m\n\ngo 1.99.9\n' > go.mod`); r.code != 0 {
		t.Fatalf("write go.mod: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "go.mod")); !strings.Contains(string(b), "go 1.99.9") {
		t.Fatalf("the sandbox's go.mod did not come back: %q", b)
	}
	r := w.sbxEnv(t, w.code, env, "exec", "--", `echo "$GOPROXY"`)
	if r.code != 0 || !strings.Contains(r.stdout, "file:///var/cache/sbx/host-go-mod,"+srv.URL) {
		t.Fatalf("second exec: exit %d, want the host's GOPROXY after the file proxy\n%s%s", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range asked {
		if strings.Contains(p, "toolchain") {
			t.Fatalf("the host's go fetched a toolchain the sandbox's go.mod named: %v", asked)
		}
	}
}

// TestSessionCacheRemovedWithReadOnlyDirs: cache = "session" keeps a
// session's caches in its state dir, removed with it. Go's module cache
// makes every module's directory read-only (0555), and a sandbox may do
// the same to any directory of its caches: the release's removal of the
// state dir failed on them, as an ordinary user, leaving the state dir
// (and the sandbox's files) behind after every release.
func TestSessionCacheRemovedWithReadOnlyDirs(t *testing.T) {
	w := newWorld(t)
	sbxAs := ordinaryUser(t, w)
	env := []string{"SBX_CACHE=session"}
	if r := sbxAs(t, w.code, env, "exec", "--session", "ro", "--keep", "--", `mkdir -p "$GOMODCACHE/example.com/m@v1.0.0/sub" && echo x > "$GOMODCACHE/example.com/m@v1.0.0/sub/f" && chmod -R a-w "$GOMODCACHE/example.com"`); r.code != 0 {
		t.Fatalf("exec: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "release", "--session", "ro"); r.code != 0 {
		t.Fatalf("release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var left []string
	filepath.WalkDir(w.state, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(p, "m@v1.0.0") {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("the released session's cache is left on the host: %v", left)
	}
}

// TestHostGoProxyCredentialsStayOut: host_caches = ["go-mod"] puts the
// host's GOPROXY after the file proxy in the sandbox's GOPROXY. A private
// proxy is often written with its credentials in the URL
// (https://user:token@proxy/): that token went into every sandbox's
// environment, which sbx otherwise keeps free of the host's secrets (the
// sandbox can write it into the tree, or send it to a listed host). The
// URL goes in without them.
func TestHostGoProxyCredentialsStayOut(t *testing.T) {
	w := newWorld(t)
	modCache := tempDir(t)
	os.MkdirAll(filepath.Join(modCache, "cache", "download"), 0o755)
	env := []string{"GOMODCACHE=" + modCache, "SBX_HOST_CACHES=go-mod", "SBX_CACHE=none", "GOFLAGS=",
		"GOPROXY=https://alice:s3cret-t0ken@proxy.corp.example/go|https://bob@mirror.example,direct"}
	r := w.sbxEnv(t, w.code, env, "exec", "--", `echo "$GOPROXY"; cat /proc/self/environ | tr '\0' '\n' | grep -c -e s3cret -e bob@ || true`)
	if r.code != 0 {
		t.Fatalf("exec: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "s3cret") || strings.Contains(r.stdout, "bob@") || !strings.HasSuffix(strings.TrimSpace(r.stdout), "\n0") {
		t.Fatalf("the host's GOPROXY credentials reached the sandbox:\n%s", r.stdout)
	}
	if want := "file:///var/cache/sbx/host-go-mod,https://proxy.corp.example/go|https://mirror.example,direct"; !strings.Contains(r.stdout, want) {
		t.Fatalf("GOPROXY in the sandbox:\n%s\nwant %s", r.stdout, want)
	}
}
