package app

import (
	"testing"
	"time"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/config"
)

// The variables cluster names in its errors are the ones config's table
// reads, and ClusterConfig carries every cluster.* key and idle_ttl.
func TestClusterConfigFromTheTable(t *testing.T) {
	for key, env := range map[string]string{
		"cluster.kubeconfig": cluster.EnvKubeconfig, "cluster.context": cluster.EnvContext,
		"cluster.namespace": cluster.EnvNamespace, "cluster.pool": cluster.EnvPool,
		"cluster.claim_timeout": cluster.EnvClaimTimeout, "cluster.persistent": cluster.EnvPersistent,
		"idle_ttl": cluster.EnvIdleTTL,
	} {
		k := config.Lookup(key)
		if k == nil {
			t.Errorf("config has no key %s", key)
			continue
		}
		found := false
		for _, e := range k.Env {
			found = found || e == env
		}
		if !found {
			t.Errorf("%s: config reads %q, cluster names %s", key, k.Env, env)
		}
	}
	cfg, err := config.Load(config.Sources{UserFile: t.TempDir() + "/none.toml", Env: []string{
		"AGENT_SANDBOX_POOL=p", "AGENT_SANDBOX_NAMESPACE=team", "AGENT_SANDBOX_CLAIM_TIMEOUT=30",
		"AGENT_SANDBOX_IDLE_TTL=2m", "AGENT_SANDBOX_PERSISTENT=true", "AGENT_SANDBOX_KUBECONFIG=/x", "AGENT_SANDBOX_CONTEXT=c",
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := ClusterConfig(cfg, Server)
	want := cluster.Config{Kubeconfig: "/x", Context: "c", Namespace: "team", Pool: "p", ClaimTimeout: 30 * time.Second, IdleTTL: 2 * time.Minute, Persistent: true}
	if got != want {
		t.Fatalf("ClusterConfig = %+v, want %+v", got, want)
	}
	if !ClusterConfig(cfg, PerCommand).Relay {
		t.Fatal("a process per command gets no relay")
	}
}
