package app

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/cache"
)

// cluster.cache_mount (the user's config or AGENT_SANDBOX_CACHE_MOUNT)
// gives a cluster session's commands the pool cache's variables; the local
// backend, cache = "none" and a project's .sbx.toml do not; a bad path is
// refused naming the key.
func TestClusterCacheEnv(t *testing.T) {
	code := project(t, "[cluster]\ncache_mount = \"/cache\"\n")
	t.Setenv("AGENT_SANDBOX_CACHE_MOUNT", "")
	os.Unsetenv("AGENT_SANDBOX_CACHE_MOUNT")
	want := cache.ClusterEnv("/cache")
	e, err := Setup(Flags{Backend: "cluster"}, Server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Params.Env, want) || !slices.Contains(want, "GOMODCACHE=/cache/go-mod") {
		t.Fatalf("cluster session env %q, want %q", e.Params.Env, want)
	}
	if e, err = Setup(Flags{}, Server, nil); err != nil || e.Params.Env != nil {
		t.Fatalf("local session env %q (%v): the local backend sets its own", e.Params.Env, err)
	}
	t.Setenv("SBX_CACHE", "none")
	if e, err = Setup(Flags{Backend: "cluster"}, Server, nil); err != nil || e.Params.Env != nil {
		t.Fatalf("cache = none: env %q (%v)", e.Params.Env, err)
	}
	t.Setenv("SBX_CACHE", "")
	os.Unsetenv("SBX_CACHE")
	t.Setenv("AGENT_SANDBOX_CACHE_MOUNT", "/pool-cache")
	if e, err = Setup(Flags{Backend: "cluster"}, Server, nil); err != nil || !slices.Contains(e.Params.Env, "GOMODCACHE=/pool-cache/go-mod") {
		t.Fatalf("from the environment: %q (%v)", e.Params.Env, err)
	}
	for _, bad := range []string{"rel/cache", "/", "/a/../b"} {
		t.Setenv("AGENT_SANDBOX_CACHE_MOUNT", bad)
		if _, err := Setup(Flags{Backend: "cluster"}, Server, nil); err == nil || !strings.Contains(err.Error(), "cluster.cache_mount") && !strings.Contains(err.Error(), "AGENT_SANDBOX_CACHE_MOUNT") {
			t.Fatalf("cache mount %q: %v", bad, err)
		}
	}
	// A project's file may not set it (it would point the user's tools at
	// another directory of the pod).
	os.Unsetenv("AGENT_SANDBOX_CACHE_MOUNT")
	if err := os.WriteFile(code+"/.sbx.toml", []byte("[cluster]\ncache_mount = \"/tmp/evil\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(Flags{Backend: "cluster"}, Server, nil); err == nil || !strings.Contains(err.Error(), "cache_mount") {
		t.Fatalf("a project's cluster.cache_mount: %v", err)
	}
}

// cluster.egress_proxy announces the cluster's allowlist proxy to a
// cluster session's commands, as the local backend announces its own;
// anything but http://HOST:PORT is refused naming the key.
func TestClusterEgressProxyEnv(t *testing.T) {
	project(t, "[cluster]\negress_proxy = \"http://sbx-proxy.sbx.svc:3128\"\n")
	for _, k := range []string{"AGENT_SANDBOX_CACHE_MOUNT", "AGENT_SANDBOX_EGRESS_PROXY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	e, err := Setup(Flags{Backend: "cluster"}, Server, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"HTTPS_PROXY=http://sbx-proxy.sbx.svc:3128", "http_proxy=http://sbx-proxy.sbx.svc:3128", "NO_PROXY=localhost,127.0.0.1,::1"} {
		if !slices.Contains(e.Params.Env, v) {
			t.Errorf("no %s in %q", v, e.Params.Env)
		}
	}
	if e, err = Setup(Flags{}, Server, nil); err != nil || e.Params.Env != nil {
		t.Fatalf("local session env %q (%v): the local backend announces its own proxy", e.Params.Env, err)
	}
	for _, bad := range []string{"sbx-proxy:3128", "https://p:3128", "http://p", "http://user:pw@p:3128", "http://p:3128/x", "http://p:0", "http://p:99999", "http://:3128"} {
		t.Setenv("AGENT_SANDBOX_EGRESS_PROXY", bad)
		if _, err := Setup(Flags{Backend: "cluster"}, Server, nil); err == nil || !strings.Contains(err.Error(), "AGENT_SANDBOX_EGRESS_PROXY") && !strings.Contains(err.Error(), "egress_proxy") {
			t.Errorf("egress proxy %q: %v", bad, err)
		}
	}
}
