// Package cli is sbx's command line: the dispatch over a table of
// subcommands (cmd/sbx holds the table, one line a subcommand) and the
// subcommands that work on the engine (exec, shell, release, ls, route,
// accept, undo). A subcommand is a Func: it parses its own flags, writes to
// the Env's streams and returns the process's exit status. The wiring of
// config into a backend and a session.Manager is internal/app's.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/internal/version"
)

// Exit codes of sbx itself; a command's own exit code passes through.
const (
	ExitUsage    = 2
	ExitSbxError = 125
)

// Env is what every subcommand gets: where to write and where to log.
type Env struct {
	Stdout, Stderr io.Writer
	Log            *slog.Logger
}

// Func runs one subcommand with the arguments after its name and returns
// the exit status.
type Func func(ctx context.Context, e *Env, args []string) int

// Command is one row of the table of subcommands.
type Command struct {
	Name    string
	Aliases []string
	// Usage is the command's lines in sbx's usage text, as printed
	// (indented two spaces); empty: the row before's lines cover it.
	Usage string
	Run   Func
	// Cluster, when set, runs instead of Run when the arguments hold
	// "--backend cluster" (which it does not get).
	Cluster Func
}

const usageHead = "usage: sbx <command> [flags]\n\ncommands:\n"

const usageTail = `
Exit status of exec: the command's own; 124 when it timed out; 125 when sbx
itself failed (claim, sync, config).
`

// Usage is sbx's usage text for the table cmds.
func Usage(cmds []Command) string {
	var b strings.Builder
	b.WriteString(usageHead)
	for _, c := range cmds {
		b.WriteString(c.Usage)
	}
	b.WriteString(usageTail)
	return b.String()
}

// Main runs the subcommand args[0] names from the table cmds, on the
// process's standard streams, logging warnings (everything with SBX_DEBUG
// set) to stderr.
func Main(ctx context.Context, args []string, cmds []Command) int {
	level := slog.LevelWarn
	if os.Getenv("SBX_DEBUG") != "" {
		level = slog.LevelDebug
	}
	e := &Env{Stdout: os.Stdout, Stderr: os.Stderr, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))}
	return e.Dispatch(ctx, args, cmds)
}

// Dispatch runs the subcommand args[0] names from the table cmds; help and
// a missing or unknown name print the usage text.
func (e *Env) Dispatch(ctx context.Context, args []string, cmds []Command) int {
	if len(args) == 0 {
		fmt.Fprint(e.Stderr, Usage(cmds))
		return ExitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(e.Stdout, Usage(cmds))
		return 0
	}
	for _, c := range cmds {
		if c.Name != args[0] && !contains(c.Aliases, args[0]) {
			continue
		}
		if c.Cluster != nil {
			if rest, ok := clusterFlag(args[1:]); ok {
				return c.Cluster(ctx, e, rest)
			}
		}
		return c.Run(ctx, e, args[1:])
	}
	fmt.Fprintf(e.Stderr, "sbx: error: unknown command %q\n%s", args[0], Usage(cmds))
	return ExitUsage
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// clusterFlag finds "--backend cluster" (or --backend=cluster) in args and
// returns the rest; ok is false when it is not there.
func clusterFlag(args []string) (rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--backend" && i+1 < len(args) && args[i+1] == "cluster":
			return append(append([]string{}, args[:i]...), args[i+2:]...), true
		case args[i] == "--backend=cluster":
			return append(append([]string{}, args[:i]...), args[i+1:]...), true
		}
	}
	return args, false
}

// Version prints sbx's version.
func Version(_ context.Context, e *Env, _ []string) int {
	fmt.Fprintf(e.Stdout, "sbx %s\n", version.String())
	return 0
}

// Fail prints a one-line reason (and optional hints) and returns 125.
func (e *Env) Fail(err error, hint ...string) int {
	// Errors can carry sandbox-chosen names (a file system error's path).
	fmt.Fprintf(e.Stderr, "sbx: error: %s\n", escape.Line(err.Error()))
	for _, h := range hint {
		fmt.Fprintf(e.Stderr, "sbx: hint: %s\n", h)
	}
	return ExitSbxError
}

// NewFlagSet is a subcommand's flag set: errors and -h go to stderr, and a
// parse error is returned (the caller exits with ExitUsage).
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sbx "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// MultiFlag is a repeatable string flag.
type MultiFlag []string

func (m *MultiFlag) String() string     { return strings.Join(*m, ",") }
func (m *MultiFlag) Set(v string) error { *m = append(*m, v); return nil }

// List is nil when the flag was not given, so config applies.
func (m MultiFlag) List() []string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Human is a duration as ls prints it: 42s, 5m, 3h, 2d.
func Human(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
