package app

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/cache"
	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/egress"
	"github.com/sbx-sh/sbx/internal/version"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox"
)

// localProvider is the local backend with cfg's egress allowlist and
// package caches.
func localProvider(cfg config.Config, log *slog.Logger) *local.Provider {
	p := &local.Provider{Version: version.String(), Log: log}
	if len(cfg.AllowNet) > 0 {
		if cfg.Network == string(sandbox.NetworkHost) {
			if log != nil {
				log.Warn("allow_net has no effect with network = \"host\" (--net): the sandbox shares the host's whole network")
			}
		} else {
			p.Egress = &local.Egress{Allow: cfg.AllowNet, Inject: cfg.Inject}
		}
	}
	mode, hostCaches := cfg.Cache, cfg.HostCaches
	p.Caches = func(stateDir string, uid, gid int) ([]sandbox.Mount, []string, error) {
		c := cache.Config{Mode: mode, HostCaches: hostCaches}
		if mode == "shared" {
			root, err := cache.Root()
			if err != nil {
				return nil, nil, err
			}
			c.Root = root
		}
		if len(hostCaches) > 0 {
			c.HostGoModCache, c.HostGoProxy = hostGoEnv()
		}
		return cache.Plan(c, stateDir, uid, gid)
	}
	return p
}

// hostGoEnv is the host's GOMODCACHE and GOPROXY, as its go command says
// (go env reads the go env file too), else from the environment. It is
// asked outside any module, with the toolchain it is: in the project's
// directory it read the go.mod there, which the sandbox writes, and a `go
// 1.99.9` line made the host fetch and run that toolchain.
func hostGoEnv() (modCache, proxy string) {
	cmd := exec.Command("go", "env", "GOMODCACHE", "GOPROXY")
	cmd.Dir, cmd.Env = "/", append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := cmd.Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 2 {
			return lines[0], lines[1]
		}
	}
	modCache = os.Getenv("GOMODCACHE")
	if modCache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, _ := os.UserHomeDir()
			gopath = filepath.Join(home, "go")
		}
		modCache = filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
	}
	return modCache, os.Getenv("GOPROXY")
}

// checkEgress refuses an inject the proxy could not honour (its host not
// in allow_net, a bad header), naming the key and the user's file, the only
// source of inject.
func checkEgress(cfg config.Config) error {
	if len(cfg.Inject) == 0 {
		return nil
	}
	allow, err := egress.ParseAllowlist(cfg.AllowNet)
	if err != nil {
		return &config.Error{Source: "configuration", Key: "allow_net", Msg: err.Error()}
	}
	if _, err := egress.NewInjector(cfg.Inject, allow); err != nil {
		return &config.Error{Source: config.UserFile(), Key: "inject", Msg: err.Error() + " (allow_net comes from your config, SBX_ALLOW_NET or --allow-net)"}
	}
	return nil
}

// clusterEnv is what a cluster backend's commands get beside the base
// environment: the variables of the pool's per-node caches when
// cluster.cache_mount names where the pool mounts them (and cache is not
// "none"), and the allowlist proxy's when cluster.egress_proxy names it.
func clusterEnv(cfg config.Config) []string {
	if cfg.Backend != "cluster" {
		return nil
	}
	var env []string
	if cfg.Cluster.CacheMount != "" && cfg.Cache != "none" {
		env = cache.ClusterEnv(cfg.Cluster.CacheMount)
	}
	if p := cfg.Cluster.EgressProxy; p != "" {
		// As the local backend announces its proxy (local/egress_linux.go).
		const noProxy = "localhost,127.0.0.1,::1"
		env = append(env, "HTTPS_PROXY="+p, "https_proxy="+p, "HTTP_PROXY="+p, "http_proxy="+p,
			"NO_PROXY="+noProxy, "no_proxy="+noProxy)
	}
	return env
}
