package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"time"

	sbxcli "github.com/sbx-sh/sbx/internal/cli"
	"github.com/sbx-sh/sbx/internal/version"
)

// The subcommands written in this package (cluster.go, doctor.go,
// setup.go) are methods of cli, over internal/cli's Env; own turns one into
// a row of the table in main.go.

const (
	exitUsage    = sbxcli.ExitUsage
	exitSbxError = sbxcli.ExitSbxError
)

// cli carries what every sub-command needs.
type cli struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

// own is the table's Func for a subcommand of this package.
func own(run func(c *cli, ctx context.Context, args []string) int) sbxcli.Func {
	return func(ctx context.Context, e *sbxcli.Env, args []string) int {
		return run(&cli{stdout: e.Stdout, stderr: e.Stderr, log: e.Log}, ctx, args)
	}
}

func (c *cli) fail(err error, hint ...string) int {
	return (&sbxcli.Env{Stdout: c.stdout, Stderr: c.stderr, Log: c.log}).Fail(err, hint...)
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet { return sbxcli.NewFlagSet(name, stderr) }

func human(d time.Duration) string { return sbxcli.Human(d) }

func versionString() string { return version.String() }
