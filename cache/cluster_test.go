package cache

import (
	"slices"
	"testing"
)

// Every variable a local sandbox gets is set below the cluster's mount,
// none left pointing at the local targets in the home.
func TestClusterEnv(t *testing.T) {
	got := ClusterEnv("/cache")
	want := []string{
		"XDG_CACHE_HOME=/cache/cache", "GOCACHE=/cache/cache/go-build", "PIP_CACHE_DIR=/cache/cache/pip",
		"GOMODCACHE=/cache/go-mod", "npm_config_cache=/cache/npm", "CARGO_HOME=/cache/cargo",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ClusterEnv(/cache) = %q, want %q", got, want)
	}
	n := 0
	for _, k := range Kinds {
		n += len(k.Env)
	}
	if len(got) != n {
		t.Fatalf("%d variables, the local caches set %d", len(got), n)
	}
}
