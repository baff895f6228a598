package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/egress"
	sbxcli "github.com/sbx-sh/sbx/internal/cli"
)

// proxyCmd is `sbx proxy --listen ADDR [--allow-net HOST]...`: the egress
// allowlist proxy on its own, for pods (docs/cluster.md). The allowlist is
// allow_net from the user's config, SBX_ALLOW_NET and the flags; each
// decision is a JSON line on stderr. It listens where it is told, and
// nowhere by default.
func proxyCmd(ctx context.Context, e *sbxcli.Env, args []string) int {
	fs := sbxcli.NewFlagSet("proxy", e.Stderr)
	listen := fs.String("listen", "", "`address` to listen on (host:port), e.g. 0.0.0.0:3128 in a pod behind a NetworkPolicy")
	var allowNet sbxcli.MultiFlag
	fs.Var(&allowNet, "allow-net", "a `host` to allow (repeatable; adds to none: replaces the config's list)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return sbxcli.ExitUsage
	}
	if *listen == "" {
		fmt.Fprintf(e.Stderr, "sbx: error: proxy needs --listen ADDRESS (e.g. --listen 0.0.0.0:3128)\n")
		return sbxcli.ExitUsage
	}
	cfg, err := config.Load(config.Sources{})
	if err != nil {
		return e.Fail(err)
	}
	if l := allowNet.List(); l != nil {
		if err := cfg.SetFlagList("--allow-net", l); err != nil {
			return e.Fail(err)
		}
	}
	if len(cfg.AllowNet) == 0 {
		return e.Fail(fmt.Errorf("allow_net is empty: the proxy would refuse everything"), "sbx proxy --listen 0.0.0.0:3128 --allow-net proxy.golang.org")
	}
	allow, err := egress.ParseAllowlist(cfg.AllowNet)
	if err != nil {
		return e.Fail(err)
	}
	p := &egress.Proxy{Allow: allow, Audit: func(d egress.Decision) {
		line, _ := json.Marshal(d)
		fmt.Fprintf(e.Stderr, "%s\n", line)
	}}
	if len(cfg.Inject) > 0 {
		fmt.Fprintf(e.Stderr, "sbx: note: inject is not served by sbx proxy (its CA would have to be in every pod's trust store); requests to those hosts are tunnelled as-is\n")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return e.Fail(fmt.Errorf("listen on %s: %w", *listen, err))
	}
	fmt.Fprintf(e.Stdout, "sbx proxy: listening on %s, allowing %v\n", ln.Addr(), cfg.AllowNet)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); ln.Close() }()
	if err := p.Serve(egress.LimitConns(ln, egress.MaxConnsPerClient)); err != nil && ctx.Err() == nil {
		return e.Fail(err)
	}
	return 0
}
