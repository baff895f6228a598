package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
)

// doctor implements `sbx doctor [--backend local|cluster]`: one line per
// check of what a first run needs, with what to do about each failure.
// Exit status 0 when every check passed, 1 otherwise.
func (c *cli) doctor(ctx context.Context, args []string) int {
	fs := newFlagSet("doctor", c.stderr)
	backend := fs.String("backend", "", "backend to check: local or cluster (default: the configured one)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	if *backend == "" {
		*backend = "local"
		if cfg, err := config.Load(config.Sources{}); err == nil && cfg.Backend != "" {
			*backend = cfg.Backend
		}
	}
	var checks []cluster.Check
	switch *backend {
	case "local":
		checks = localChecks()
		if checks[0].OK {
			checks = append(checks, layerChecks(ctx)...)
		}
		checks = append(checks, workspaceCheck())
	case "cluster":
		cfg, err := config.Load(config.Sources{})
		if err != nil {
			checks = append(checks, cluster.Check{Name: "configuration", Detail: err.Error(), Fix: "fix the key or variable named"})
		} else {
			checks = cluster.Doctor(ctx, app.ClusterConfig(cfg, app.Server))
		}
	default:
		fmt.Fprintf(c.stderr, "sbx: error: --backend %q: want local or cluster\n", *backend)
		return exitUsage
	}
	checks = append(checks, hostGitChecks()...)
	fmt.Fprintf(c.stdout, "backend %s\n", *backend)
	if failed := printChecks(c, checks); failed > 0 {
		fmt.Fprintf(c.stdout, "%d of %d checks failed\n", failed, len(checks))
		return 1
	}
	fmt.Fprintf(c.stdout, "all %d checks passed\n", len(checks))
	return 0
}

// localChecks are what the local backend needs from the kernel.
func localChecks() []cluster.Check {
	var out []cluster.Check
	uc := cluster.Check{Name: "user namespaces"}
	max := readInt("/proc/sys/user/max_user_namespaces")
	clone := readInt("/proc/sys/kernel/unprivileged_userns_clone") // Debian/Ubuntu only
	apparmor := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	switch {
	case max == 0:
		uc.Detail = "user.max_user_namespaces is 0"
		uc.Fix = "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d)"
	case clone == 0:
		uc.Detail = "kernel.unprivileged_userns_clone is 0"
		uc.Fix = "sysctl -w kernel.unprivileged_userns_clone=1"
	case apparmor == 1 && os.Geteuid() != 0:
		uc.Detail = "AppArmor restricts unprivileged user namespaces"
		uc.Fix = "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for sbx"
	default:
		uc.OK = true
		uc.Detail = "available"
		if max > 0 {
			uc.Detail = fmt.Sprintf("available (max %d)", max)
		}
	}
	return append(out, uc)
}

// layerChecks start one throwaway sandbox and report each isolation layer
// it really got (local.Provider.Layers), with what to do about a missing one.
func layerChecks(ctx context.Context) []cluster.Check {
	p := &local.Provider{Version: versionString()}
	layers, err := p.Layers(ctx)
	if err != nil {
		return []cluster.Check{{Name: "sandbox layers", Detail: err.Error(),
			Fix: "see the init log quoted above; `sbx exec -- true` shows the same error"}}
	}
	var out []cluster.Check
	for _, l := range layers {
		c := cluster.Check{Name: l.Name, OK: l.Active, Detail: l.Detail}
		if !l.Active {
			c.Fix = layerFix(l.Name)
		}
		out = append(out, c)
	}
	return out
}

// workspaceCheck says where a new local session's workspaces go
// (session/workspace.go): in memory for a small tree where that can be
// bounded, else on disk, and why. Either way works: never a failure.
func workspaceCheck() cluster.Check {
	c := cluster.Check{Name: "workspaces", OK: true}
	cfg, err := config.Load(config.Sources{})
	switch {
	case err != nil:
		c.OK, c.Detail, c.Fix = false, err.Error(), "fix the key or variable named"
	case cfg.Workspace == "disk":
		c.Detail = "on disk, in each session's state dir (workspace = \"disk\")"
	default:
		p := &local.Provider{Version: versionString()}
		l := sandbox.Limits{MemoryBytes: cfg.Memory, Pids: cfg.Pids}
		if root, err := p.MemoryWorkRoot(l, 0); err != nil {
			c.Detail = "on disk, in each session's state dir: not in memory because " + err.Error()
		} else {
			c.Detail = fmt.Sprintf("in memory under %s for a tree of at most %d entries and %d MiB, else on disk", root,
				session.MemoryWorkspaceFiles, session.MemoryWorkspaceBytes>>20)
		}
	}
	return c
}

func layerFix(name string) string {
	switch name {
	case "uid mapping":
		return "run sbx as an ordinary user, or as root list a subordinate range for root in /etc/subuid and /etc/subgid (root:100000:65536)"
	case "/proc masking":
		return "this is a bug in sbx: report it with the output of `sbx doctor`"
	case "cgroups":
		ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			return "the host has no cgroup v2 (/sys/fs/cgroup/cgroup.controllers): limits are rlimits; boot with systemd.unified_cgroup_hierarchy=1 for cgroup limits"
		}
		return "host cgroup v2 controllers: " + strings.TrimSpace(string(ctl)) + "; as an ordinary user run sbx in a delegated cgroup " +
			"(systemd-run --user --scope -p Delegate=yes sbx ...) with memory and pids enabled"
	}
	return "needs a kernel with it enabled"
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// hostGitChecks are what routed commands (git push/fetch/pull run on the
// host) need: git itself, an identity, and some way to authenticate.
func hostGitChecks() []cluster.Check {
	git, err := exec.LookPath("git")
	if err != nil {
		return []cluster.Check{{Name: "host git", Detail: "git is not on PATH", Fix: "install git; routed commands (git push/fetch/pull) run it on the host"}}
	}
	out := []cluster.Check{{Name: "host git", OK: true, Detail: git}}
	get := func(key string) string {
		b, _ := exec.Command(git, "config", "--global", "--get", key).Output()
		return strings.TrimSpace(string(b))
	}
	id := cluster.Check{Name: "git identity"}
	if name, email := get("user.name"), get("user.email"); name != "" && email != "" {
		id.OK, id.Detail = true, name+" <"+email+">"
	} else {
		id.Detail = "user.name or user.email is not set"
		id.Fix = `git config --global user.name "..." && git config --global user.email "..."`
	}
	cred := cluster.Check{Name: "git credentials"}
	var found []string
	if h := get("credential.helper"); h != "" {
		found = append(found, "credential.helper="+h)
	}
	if os.Getenv("SSH_AUTH_SOCK") != "" {
		found = append(found, "ssh agent")
	}
	if home, err := os.UserHomeDir(); err == nil {
		for _, f := range []string{".git-credentials", ".ssh/id_ed25519", ".ssh/id_rsa", ".ssh/id_ecdsa"} {
			if _, err := os.Stat(filepath.Join(home, f)); err == nil {
				found = append(found, "~/"+f)
			}
		}
	}
	for _, v := range []string{"GH_TOKEN", "GITHUB_TOKEN", "GIT_ASKPASS"} {
		if os.Getenv(v) != "" {
			found = append(found, v)
		}
	}
	if len(found) > 0 {
		cred.OK, cred.Detail = true, strings.Join(found, ", ")
	} else {
		cred.Detail = "no credential helper, ssh agent, ssh key or token found"
		cred.Fix = "set up the credentials git push uses on this host (ssh-agent, or git config --global credential.helper ...); they never enter the sandbox"
	}
	return append(out, id, cred)
}
