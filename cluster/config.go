package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what the cluster backend needs to know. Package config reads
// it (its cluster.* keys, from the user's file and the AGENT_SANDBOX_*
// variables below) and internal/app fills it in; zero fields get the
// defaults below.
type Config struct {
	// Kubeconfig is the kubeconfig file to use. Empty means
	// ~/.kube/agent-sandbox.yaml when it exists, else client-go's usual rules
	// (KUBECONFIG, ~/.kube/config, in-cluster).
	Kubeconfig string
	// Context is the kubeconfig context; empty means its current context.
	Context string
	// Namespace holds the pool and the claims. Default "sbx".
	Namespace string
	// Pool is the SandboxWarmPool to claim from.
	Pool string
	// ClaimTimeout bounds how long a claim may take to become Ready. Default 180s.
	ClaimTimeout time.Duration
	// IdleTTL is how far ahead shutdownTime is set (and renewed) when the
	// session's own idle TTL is zero. Default 1800s.
	IdleTTL time.Duration
	// Persistent makes a session key map to one claim: Claim reuses the
	// claim labelled with the key when there is a usable one.
	Persistent bool
	// Owner identifies this user on the cluster (label sbx.dev/owner).
	// Default: the OS user name.
	Owner string
	// Relay makes a kept session's later processes share one exec of the
	// helper through a background relay (relay.go). For a CLI that runs one
	// process per command; a long-lived process needs none.
	Relay bool
}

// Environment variables that set the cluster.* keys of package config's
// table (a test in internal/app holds the two to the same names); named
// here for the errors that tell the user what to set.
const (
	EnvKubeconfig   = "AGENT_SANDBOX_KUBECONFIG"
	EnvNamespace    = "AGENT_SANDBOX_NAMESPACE"
	EnvPool         = "AGENT_SANDBOX_POOL"
	EnvClaimTimeout = "AGENT_SANDBOX_CLAIM_TIMEOUT"
	EnvIdleTTL      = "AGENT_SANDBOX_IDLE_TTL"
	EnvPersistent   = "AGENT_SANDBOX_PERSISTENT"
	EnvContext      = "AGENT_SANDBOX_CONTEXT"
)

// Defaults.
const (
	DefaultNamespace    = "sbx"
	DefaultClaimTimeout = 180 * time.Second
	DefaultIdleTTL      = 1800 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.ClaimTimeout <= 0 {
		c.ClaimTimeout = DefaultClaimTimeout
	}
	if c.IdleTTL <= 0 {
		c.IdleTTL = DefaultIdleTTL
	}
	if c.Owner == "" {
		c.Owner = currentUser()
	}
	return c
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if v := os.Getenv("USER"); v != "" {
		return v
	}
	return "unknown"
}

// KubeconfigError means the kubeconfig could not be read or used.
type KubeconfigError struct {
	Path string // empty when client-go's default rules were used
	Err  error
}

func (e *KubeconfigError) Error() string {
	where := e.Path
	if where == "" {
		where = "the default kubeconfig (KUBECONFIG, ~/.kube/config)"
	}
	return fmt.Sprintf("kubeconfig %s is not usable: %v (set %s to a readable kubeconfig; sbx kubeconfig writes one)", where, e.Err, EnvKubeconfig)
}

func (e *KubeconfigError) Unwrap() error { return e.Err }

// KubeconfigPath returns the kubeconfig file Config would use, or "" when
// client-go's default rules apply.
func (c Config) KubeconfigPath() string {
	if c.Kubeconfig != "" {
		return expandHome(c.Kubeconfig)
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".kube", "agent-sandbox.yaml")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// RESTConfig loads the client configuration the kubeconfig describes.
func (c Config) RESTConfig() (*rest.Config, error) {
	path := c.KubeconfigPath()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		if _, err := os.ReadFile(path); err != nil {
			return nil, &KubeconfigError{Path: path, Err: err}
		}
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	}
	over := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			err = errors.New("no cluster is configured in it")
		}
		return nil, &KubeconfigError{Path: path, Err: err}
	}
	rc.UserAgent = "sbx"
	// Claims and execs are few but latency-sensitive: do not let client-side
	// throttling add waits.
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}
