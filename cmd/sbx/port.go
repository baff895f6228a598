package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/internal/app"
	sbxcli "github.com/sbx-sh/sbx/internal/cli"
	"github.com/sbx-sh/sbx/portfwd"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
)

// portCmd is `sbx port [--session S] HOSTPORT[:SANDBOXPORT]`: a host
// loopback port forwarded into a kept session's sandbox until Ctrl-C or
// the session ends.
func portCmd(ctx context.Context, e *sbxcli.Env, args []string) int {
	fs := sbxcli.NewFlagSet("port", e.Stderr)
	sess := fs.String("session", "default", "session `name` (a kept one: sbx exec --keep)")
	if err := fs.Parse(args); err != nil {
		return sbxcli.ExitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(e.Stderr, "sbx: error: port needs one HOSTPORT[:SANDBOXPORT], e.g. sbx port --session dev 8080:3000\n")
		return sbxcli.ExitUsage
	}
	spec, err := portfwd.Parse(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(e.Stderr, "sbx: error: port %v\n", err)
		return sbxcli.ExitUsage
	}
	if err := session.CheckName(*sess); err != nil {
		return e.Fail(err)
	}
	cfg, err := config.Load(config.Sources{})
	if err != nil {
		return e.Fail(err)
	}
	root, err := session.DefaultStateRoot()
	if err != nil {
		return e.Fail(err)
	}
	prov, _, err := app.NewProvider(cfg, app.PerCommand, e.Log)
	if err != nil {
		return e.Fail(err)
	}
	dir := filepath.Join(root, *sess)
	sb, err := prov.Attach(ctx, sandbox.Spec{Name: *sess, StateDir: dir})
	if err != nil {
		var stale *sandbox.StaleError
		if errors.Is(err, sandbox.ErrNotFound) || errors.As(err, &stale) {
			return e.Fail(fmt.Errorf("session %s has no running sandbox", *sess),
				fmt.Sprintf("start one that stays: sbx exec --session %s --keep -- npm run dev &", *sess))
		}
		return e.Fail(err)
	}
	pd, ok := sb.(sandbox.PortDialer)
	if !ok {
		return e.Fail(fmt.Errorf("the %s backend cannot forward ports yet", prov.Name()))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err = portfwd.Forward(ctx, pd, dir, spec, func(addr string) {
		fmt.Fprintf(e.Stdout, "forwarding %s to port %d in session %s's sandbox (Ctrl-C to stop)\n", addr, spec.SandboxPort, *sess)
	}, func(format string, a ...any) {
		fmt.Fprintf(e.Stderr, "sbx: port: "+format+"\n", a...)
	})
	if errors.Is(err, portfwd.ErrSandboxGone) {
		fmt.Fprintf(e.Stderr, "sbx: port: session %s's sandbox is gone; the forward ends with it\n", *sess)
		return 0
	}
	if err != nil {
		return e.Fail(err)
	}
	return 0
}
