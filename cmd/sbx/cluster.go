package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/sandbox"
)

// The cluster backend's sub-commands. The dispatch in cli.go wires:
//
//	sbx pool render ...          -> c.pool(ctx, args[1:])
//	sbx kubeconfig ...           -> c.kubeconfig(ctx, args[1:])
//	sbx ls --backend cluster     -> c.clusterList(ctx, args)     (args without --backend)
//	sbx release --backend cluster (--session K | --all) -> c.clusterRelease(ctx, args)
//	--backend cluster / backend = "cluster"                -> newClusterProvider(c.log)

const clusterUsage = `usage:
  sbx pool render --tenant T --image IMG [--namespace sbx] [--replicas 2] [--runtime-class gvisor]
                  [--memory 4Gi] [--cpu 2] [--cache-mount PATH] [--cache-root /var/lib/sbx/cache]
                  [--writable-dir PATH]... [--writable-root] [--deny-egress] [--egress-cidr CIDR]...
                  [--helper-image IMG] [--helper-path /usr/local/bin/sbx-inpod]
      print a SandboxTemplate and a SandboxWarmPool for one tenant (apply with kubectl apply -f -)
  sbx kubeconfig [--admin-kubeconfig PATH] [--namespace sbx] [--service-account sbx] [--duration 24h] [-o FILE]
      write a kubeconfig for sbx's least-privilege service account (cluster/deploy/rbac.yaml)
`

// newClusterProvider is the cluster backend configured from the
// AGENT_SANDBOX_* environment.
func newClusterProvider(log *slog.Logger) (*cluster.Provider, error) {
	p, _, err := app.NewClusterProvider(app.PerCommand, log)
	return p, err
}

// pool implements `sbx pool render`.
func (c *cli) pool(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] != "render" {
		fmt.Fprint(c.stderr, clusterUsage)
		return exitUsage
	}
	fs := newFlagSet("pool render", c.stderr)
	var o cluster.PoolOptions
	fs.StringVar(&o.Tenant, "tenant", "", "tenant `name` (a DNS label); the pool is sbx-<tenant>")
	fs.StringVar(&o.Image, "image", "", "sandbox `image`")
	fs.StringVar(&o.Namespace, "namespace", cluster.DefaultNamespace, "`namespace` of the pool")
	fs.IntVar(&o.Replicas, "replicas", 2, "warm sandboxes to keep ready")
	fs.StringVar(&o.RuntimeClass, "runtime-class", "", "pods' runtimeClassName (gvisor in production; empty: the node default)")
	fs.StringVar(&o.Memory, "memory", "4Gi", "memory limit per sandbox")
	fs.StringVar(&o.CPU, "cpu", "2", "CPU limit per sandbox")
	fs.StringVar(&o.CacheMount, "cache-mount", "", "mount the tenant's per-node package cache at this `path`")
	fs.StringVar(&o.CacheRoot, "cache-root", "/var/lib/sbx/cache", "node `directory` holding one cache directory per tenant")
	fs.BoolVar(&o.WritableRoot, "writable-root", false, "leave the container's root file system writable (default: read-only, /tmp and "+sandbox.Home+" emptyDirs)")
	fs.Func("writable-dir", "one more writable emptyDir at this `path` (where the users' code dirs appear, e.g. /work); repeatable", func(v string) error {
		o.WritableDirs = append(o.WritableDirs, v)
		return nil
	})
	fs.BoolVar(&o.DenyEgress, "deny-egress", false, "add a NetworkPolicy: the pods reach the cluster DNS and the --egress-cidr ranges only")
	fs.Func("egress-cidr", "a `CIDR` the pods may reach (the allowlist proxy's address; implies --deny-egress); repeatable", func(v string) error {
		o.EgressCIDRs = append(o.EgressCIDRs, v)
		return nil
	})
	fs.StringVar(&o.HelperImage, "helper-image", "", "preinstall sbx's in-pod helper from this `image` (an init container copies it into the pod's /tmp, so a claim needs no upload; sbx checks its hash and uploads its own build when it differs)")
	fs.StringVar(&o.HelperPath, "helper-path", "", "`path` of a static sbx-inpod in the helper image (default "+cluster.DefaultHelperPath+"); alone, it preinstalls from --image")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	y, err := cluster.RenderPool(o, args[1:]...)
	if err != nil {
		return c.fail(err, "sbx pool render --tenant acme --image registry.example/dev:1 --runtime-class gvisor --cache-mount /cache")
	}
	c.stdout.Write(y)
	return 0
}

// kubeconfig implements `sbx kubeconfig`: with an operator's (admin)
// kubeconfig, ask for a service-account token and print a kubeconfig using it.
func (c *cli) kubeconfig(ctx context.Context, args []string) int {
	fs := newFlagSet("kubeconfig", c.stderr)
	adminPath := fs.String("admin-kubeconfig", "", "the operator's kubeconfig (default: KUBECONFIG, ~/.kube/config)")
	var o cluster.KubeconfigOptions
	fs.StringVar(&o.Namespace, "namespace", cluster.DefaultNamespace, "`namespace` of the service account")
	fs.StringVar(&o.ServiceAccount, "service-account", "sbx", "service account `name`")
	fs.DurationVar(&o.Duration, "duration", 24*time.Hour, "token lifetime")
	fs.StringVar(&o.Server, "server", "", "API server `URL` to write (default: the admin kubeconfig's)")
	out := fs.String("o", "", "write to `file` (mode 0600) instead of standard output")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if *adminPath != "" {
		rules.ExplicitPath = *adminPath
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return c.fail(&cluster.KubeconfigError{Path: *adminPath, Err: err}, "pass --admin-kubeconfig with an account that may create serviceaccounts/token in "+o.Namespace)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return c.fail(err)
	}
	b, err := cluster.ServiceAccountKubeconfig(ctx, kube, rc, o)
	if err != nil {
		return c.fail(err, "apply cluster/deploy/rbac.yaml first (it creates the service account)")
	}
	if *out == "" {
		c.stdout.Write(b)
		return 0
	}
	if err := os.WriteFile(*out, b, 0o600); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stderr, "wrote %s: set %s=%s (token valid for %s)\n", *out, cluster.EnvKubeconfig, *out, o.Duration)
	return 0
}

// clusterList implements `sbx ls --backend cluster`: this user's claims.
func (c *cli) clusterList(ctx context.Context, args []string) int {
	fs := newFlagSet("ls", c.stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	p, err := newClusterProvider(c.log)
	if err != nil {
		return c.fail(err)
	}
	infos, err := p.List(ctx)
	if err != nil {
		return c.fail(err, "sbx doctor --backend cluster checks the setup")
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tCLAIM\tREADY\tPERSISTENT\tAGE\tEXPIRES IN")
	now := time.Now()
	for _, in := range infos {
		exp := "-"
		if !in.ShutdownTime.IsZero() {
			exp = human(in.ShutdownTime.Sub(now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\t%s\n", in.Session, in.Name, in.Ready, in.Persistent, human(now.Sub(in.Created)), exp)
	}
	tw.Flush()
	return 0
}

// clusterRelease implements `sbx release --backend cluster (--session K | --all)`:
// it deletes claims found by label, so it works from any machine and after
// a restart.
func (c *cli) clusterRelease(ctx context.Context, args []string) int {
	fs := newFlagSet("release", c.stderr)
	sess := fs.String("session", "", "session `name` to release")
	all := fs.Bool("all", false, "release every claim of this user")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if (*sess == "") == !*all || fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "sbx: error: release needs --session NAME or --all\n")
		return exitUsage
	}
	p, err := newClusterProvider(c.log)
	if err != nil {
		return c.fail(err)
	}
	var names []string
	if *all {
		names, err = p.ReleaseAll(ctx)
	} else {
		names, err = p.ReleaseSession(ctx, *sess)
	}
	for _, n := range names {
		fmt.Fprintf(c.stdout, "released %s\n", n)
	}
	if err != nil {
		return c.fail(err)
	}
	if len(names) == 0 && !*all {
		fmt.Fprintf(c.stderr, "sbx: note: no claim of session %s found\n", *sess)
	}
	return 0
}

// printChecks prints one line per check and returns how many failed.
func printChecks(c *cli, checks []cluster.Check) int {
	failed := 0
	for _, ch := range checks {
		mark := "ok  "
		if !ch.OK {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(c.stdout, "%s %s: %s\n", mark, ch.Name, ch.Detail)
		if !ch.OK && ch.Fix != "" {
			fmt.Fprintf(c.stdout, "     fix: %s\n", ch.Fix)
		}
	}
	return failed
}
