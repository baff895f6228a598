package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/internal/version"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Exit codes of sbx itself; a command's own exit code passes through.
const (
	exitUsage    = 2
	exitSbxError = 125
)

const usage = `usage: sbx <command> [flags]

commands:
  exec [--session NAME] [--keep] [--timeout DURATION] [--disk SIZE] [--net] [--code-dir DIR]... [--backend B] -- COMMAND...
                 run COMMAND (a shell command line) in the session's sandbox
  shell [--session NAME] [--keep] [--disk SIZE] [--net] [--code-dir DIR]...
                 an interactive shell in the session's sandbox
  release (--session NAME | --all)
                 release a kept session's sandbox
  ls             list kept sessions
  route [--json] [--cwd DIR] [--code-dir DIR]... [--host-command PREFIX]... -- COMMAND
                 say whether COMMAND would run on the host or in the sandbox, and why
  accept [--all] [--code-dir DIR]... [PATH...]
                 list the sandbox's changes to protected files (agent and editor
                 settings) waiting in .sbx/quarantine, or apply the ones named
  accept (--deletions | --reject-deletions) [--session NAME]
                 apply, or drop, the deletions a command made that sbx held
                 (most of a code dir, or git's core)
  undo [--session NAME] [PATH...]
                 put back on the host what the last command's pull-back
                 overwrote, deleted or created, or the named paths
  setup (claude-code|codex|cursor|windsurf) [--global] [--undo]
                 put a client on sbx-mcp with its own shell and file tools
                 off, and check it with the client itself
  doctor [--backend local|cluster]
                 check everything a first run needs, one line per check
  pool render ... / kubeconfig ...
                 the cluster backend's operator kit (see docs/cluster.md)
  ls --backend cluster / release --backend cluster (--session K | --all)
                 this user's claims on the cluster
  version        print sbx's version

Exit status of exec: the command's own; 124 when it timed out; 125 when sbx
itself failed (claim, sync, config).
`

func versionString() string { return version.String() }

// cli carries what every sub-command needs.
type cli struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

func run(ctx context.Context, args []string) int {
	c := &cli{stdout: os.Stdout, stderr: os.Stderr}
	level := slog.LevelWarn
	if os.Getenv("SBX_DEBUG") != "" {
		level = slog.LevelDebug
	}
	c.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "exec":
		return c.exec(ctx, args[1:], false)
	case "shell":
		return c.exec(ctx, args[1:], true)
	case "release":
		if rest, ok := clusterFlag(args[1:]); ok {
			return c.clusterRelease(ctx, rest)
		}
		return c.release(ctx, args[1:])
	case "ls", "list":
		if rest, ok := clusterFlag(args[1:]); ok {
			return c.clusterList(ctx, rest)
		}
		return c.list(ctx, args[1:])
	case "route":
		return c.route(args[1:])
	case "accept":
		return c.accept(ctx, args[1:])
	case "undo":
		return c.undo(ctx, args[1:])
	case "doctor":
		return c.doctor(ctx, args[1:])
	case "setup":
		return c.setupClient(ctx, args[1:])
	case "pool":
		return c.pool(ctx, args[1:])
	case "kubeconfig":
		return c.kubeconfig(ctx, args[1:])
	case "version", "--version":
		fmt.Fprintf(c.stdout, "sbx %s\n", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, usage)
		return 0
	}
	fmt.Fprintf(c.stderr, "sbx: error: unknown command %q\n%s", args[0], usage)
	return exitUsage
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

// fail prints a one-line reason (and an optional hint) and returns 125.
func (c *cli) fail(err error, hint ...string) int {
	// Errors can carry sandbox-chosen names (a file system error's path).
	fmt.Fprintf(c.stderr, "sbx: error: %s\n", escape.Line(err.Error()))
	for _, h := range hint {
		fmt.Fprintf(c.stderr, "sbx: hint: %s\n", h)
	}
	return exitSbxError
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// list is nil when the flag was not given, so config applies.
func (m multiFlag) list() []string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sbx "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func (c *cli) exec(ctx context.Context, args []string, shell bool) int {
	name := "exec"
	if shell {
		name = "shell"
	}
	fs := newFlagSet(name, c.stderr)
	sess := fs.String("session", "default", "session `name`")
	keep := fs.Bool("keep", false, "keep the sandbox for later calls with the same --session")
	timeout := fs.String("timeout", "", "kill the command after this `duration` (exit 124)")
	net := fs.Bool("net", false, "share the host network (default: loopback only)")
	disk := fs.String("disk", "", "what one command may bring back and the workspace may take on the host disk, a `size` (default: the config's disk, 10GiB; 0 for none)")
	var codeDirs, hostCommands multiFlag
	fs.Var(&codeDirs, "code-dir", "a code `dir` to sync with the sandbox (repeatable; default: the git top level, else the current directory)")
	fs.Var(&hostCommands, "host-command", "a command `prefix` that runs on the host (repeatable; replaces the default list)")
	backend := fs.String("backend", "", "`local` or `cluster` (default: the config's backend)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	command := fs.Args()
	if !shell && len(command) == 0 {
		fmt.Fprintf(c.stderr, "sbx: error: exec needs a command: sbx exec [flags] -- COMMAND...\n")
		return exitUsage
	}
	if shell && len(command) > 0 {
		fmt.Fprintf(c.stderr, "sbx: error: shell takes no command; use sbx exec\n")
		return exitUsage
	}
	if shell && !term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprintf(c.stderr, "sbx: error: sbx shell needs a terminal on its standard input; use sbx exec -- COMMAND for scripts\n")
		return exitUsage
	}
	e, err := app.Setup(app.Flags{
		CodeDirs: codeDirs, Net: *net, Timeout: *timeout, Disk: *disk,
		HostCommands: hostCommands.list(), Backend: *backend, Keep: *keep,
	}, app.PerCommand, c.log)
	if err != nil {
		return c.fail(err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	s, err := e.Manager.Open(ctx, *sess, e.Params)
	if err != nil {
		return c.fail(err)
	}
	for _, n := range s.Notices() {
		fmt.Fprintf(c.stderr, "sbx: note: %s\n", n)
	}
	// Release (or keep) the session whatever happens below, even on a signal.
	defer func() {
		err := s.Close(context.Background())
		for _, n := range s.Notices() {
			fmt.Fprintf(c.stderr, "sbx: note: %s\n", n)
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "sbx: error: release session %s: %v\n", *sess, err)
		}
	}()
	r := session.Run{Dir: e.Cwd, Stdout: safeOutput(os.Stdout), Stderr: safeOutput(os.Stderr), Timeout: e.Config.Timeout}
	if shell {
		restore, tty, err := rawTerminal()
		if err != nil {
			return c.fail(err)
		}
		defer restore()
		r.Argv = []string{"/bin/bash", "-l"}
		if _, err := os.Stat("/bin/bash"); err != nil {
			r.Argv = []string{"/bin/sh", "-i"}
		}
		r.Stdin, r.TTY, r.Timeout = os.Stdin, tty, 0
	} else {
		r.Command = strings.Join(command, " ")
	}
	out, err := s.Exec(ctx, r)
	reportSync(c.stderr, out.Sync, *sess)
	for _, n := range s.Notices() {
		fmt.Fprintf(c.stderr, "sbx: note: %s\n", n)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(c.stderr, "sbx: interrupted\n")
			return 130
		}
		return c.fail(err)
	}
	if out.TimedOut {
		fmt.Fprintf(c.stderr, "sbx: command timed out after %s and was killed with everything it started\n", e.Config.Timeout)
	}
	return out.ExitCode
}

// reportSync tells the user what the sync did not simply apply.
func reportSync(w io.Writer, rep sbxsync.Report, sess string) {
	for _, k := range rep.HostKept {
		fmt.Fprintf(w, "sbx: conflict: %s\n", escape.Line(k))
	}
	for _, d := range rep.JournalDropped {
		fmt.Fprintf(w, "sbx: journal: %s\n", escape.Line(d))
	}
	if len(rep.Held) > 0 {
		fmt.Fprintf(w, "sbx: held: the command's deletions were not applied to the host, because %s:\n", escape.Line(rep.HeldReason))
		for i, p := range rep.Held {
			if i == 20 {
				fmt.Fprintf(w, "sbx: held:   ... and %d more\n", len(rep.Held)-i)
				break
			}
			fmt.Fprintf(w, "sbx: held:   %s\n", escape.Name(p))
		}
		fmt.Fprintf(w, "sbx: held: the host keeps these files (the sandbox does not have them); apply the deletions with: sbx accept --deletions --session %s, or drop them (the files go back into the sandbox) with: sbx accept --reject-deletions --session %s\n", sess, sess)
	} else if rep.HeldWaiting > 0 {
		fmt.Fprintf(w, "sbx: held: %d deletions of an earlier command still wait: sbx accept --deletions --session %s (or --reject-deletions)\n", rep.HeldWaiting, sess)
	}
	for _, ref := range rep.Refused {
		fmt.Fprintf(w, "sbx: not brought back: %s\n", ref.Error())
	}
	for _, c := range rep.Conflicts {
		fmt.Fprintf(w, "sbx: conflict: %s\n", session.ConflictNote(c))
	}
	for _, q := range rep.Quarantined {
		fmt.Fprintf(w, "sbx: quarantined: %s: the sandbox changed a file host tools trust; review it under %s and apply it with sbx accept\n", escape.Name(q), sbxsync.QuarantineDir)
	}
}

// safeOutput hands a plain file or pipe to the sandbox as it is (no copy),
// but never the user's terminal: terminal ioctls on it would reach the host.
func safeOutput(f *os.File) io.Writer {
	if term.IsTerminal(int(f.Fd())) {
		return struct{ io.Writer }{f}
	}
	return f
}

// rawTerminal puts the terminal on stdin in raw mode and follows its size.
func rawTerminal() (restore func(), tty *sandbox.TTY, err error) {
	fd := int(os.Stdin.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	size := func() sandbox.WindowSize {
		w, h, err := term.GetSize(fd)
		if err != nil {
			return sandbox.WindowSize{Rows: 24, Cols: 80}
		}
		return sandbox.WindowSize{Rows: uint16(h), Cols: uint16(w)}
	}
	resize := make(chan sandbox.WindowSize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			select {
			case resize <- size():
			default:
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		term.Restore(fd, old)
	}, &sandbox.TTY{Size: size(), Resize: resize}, nil
}

// manager is the engine on the configured backend, for the commands that
// work on existing sessions (ls, release, accept, undo).
func (c *cli) manager() (*session.Manager, error) {
	return app.Manager(app.PerCommand, c.log)
}

func (c *cli) release(ctx context.Context, args []string) int {
	fs := newFlagSet("release", c.stderr)
	sess := fs.String("session", "", "session `name` to release")
	all := fs.Bool("all", false, "release every session")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if (*sess == "") == !*all || fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "sbx: error: release needs --session NAME or --all\n")
		return exitUsage
	}
	m, err := c.manager()
	if err != nil {
		return c.fail(err)
	}
	if *all {
		names, err := m.ReleaseAll(ctx)
		for _, n := range names {
			fmt.Fprintf(c.stdout, "released %s\n", n)
		}
		if err != nil {
			return c.fail(err)
		}
		return 0
	}
	notes, err := m.ReleaseNotes(ctx, *sess)
	for _, n := range notes {
		fmt.Fprintf(c.stderr, "sbx: note: %s\n", n)
	}
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "released %s\n", *sess)
	return 0
}

func (c *cli) list(ctx context.Context, args []string) int {
	fs := newFlagSet("ls", c.stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	m, err := c.manager()
	if err != nil {
		return c.fail(err)
	}
	infos, err := m.List(ctx)
	if err != nil {
		return c.fail(err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBACKEND\tAGE\tIDLE\tCODE DIRS")
	now := time.Now()
	for _, in := range infos {
		if in.Stale != "" {
			fmt.Fprintf(c.stderr, "sbx: note: %s; cleaned up\n", in.Stale)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, in.Backend, human(now.Sub(in.Created)), human(now.Sub(in.LastUsed)), strings.Join(in.CodeDirs, ","))
	}
	tw.Flush()
	return 0
}

func human(d time.Duration) string {
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

// route explains where a command would run. It only decides, never runs.
func (c *cli) route(args []string) int {
	fs := newFlagSet("route", c.stderr)
	asJSON := fs.Bool("json", false, "print {\"where\":...,\"reason\":...}")
	cwdFlag := fs.String("cwd", "", "decide as if run from `dir` (default: the current directory)")
	var codeDirs, hostCommands multiFlag
	fs.Var(&codeDirs, "code-dir", "a code `dir` (repeatable; default: the git top level, else the current directory)")
	fs.Var(&hostCommands, "host-command", "a host command `prefix` (repeatable; replaces the configured list)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(c.stderr, "sbx: error: route needs a command: sbx route [flags] -- COMMAND\n")
		return exitUsage
	}
	command := strings.Join(fs.Args(), " ")
	cwd := *cwdFlag
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			fmt.Fprintf(c.stderr, "sbx: error: %v\n", err)
			return exitUsage
		}
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		fmt.Fprintf(c.stderr, "sbx: error: %v\n", err)
		return exitUsage
	}
	cfg, err := config.Load(config.Sources{})
	if err != nil {
		fmt.Fprintf(c.stderr, "sbx: error: %v\n", err)
		return exitUsage
	}
	if hostCommands.list() != nil {
		cfg.HostCommands = hostCommands
	}
	prefixes, err := router.ParsePrefixes(cfg.HostCommands)
	if err != nil {
		fmt.Fprintf(c.stderr, "sbx: error: %v\n", err)
		return exitUsage
	}
	dirs := app.ChooseCodeDirs(codeDirs, cfg.CodeDirs, cwd)
	for i, d := range dirs {
		if dirs[i], err = filepath.Abs(d); err != nil {
			fmt.Fprintf(c.stderr, "sbx: error: %v\n", err)
			return exitUsage
		}
	}
	d := router.Decide(command, cwd, dirs, prefixes)
	if *asJSON {
		raw, _ := json.Marshal(d)
		fmt.Fprintf(c.stdout, "%s\n", raw)
		return 0
	}
	reason := strings.TrimPrefix(d.Reason, string(d.Where)+": ")
	fmt.Fprintf(c.stdout, "%s: %s\n", d.Where, reason)
	return 0
}

// accept lists or applies quarantined changes to protected files, and
// applies or drops held deletions.
func (c *cli) accept(ctx context.Context, args []string) int {
	fs := newFlagSet("accept", c.stderr)
	all := fs.Bool("all", false, "apply every quarantined file")
	var codeDirs multiFlag
	fs.Var(&codeDirs, "code-dir", "a code `dir` (repeatable; default: the git top level, else the current directory)")
	deletions := fs.Bool("deletions", false, "apply the deletions sbx held for the session")
	reject := fs.Bool("reject-deletions", false, "drop the deletions sbx held for the session: the host keeps the files and the next command puts them back into the sandbox")
	sess := fs.String("session", "default", "the session `name` whose held deletions to apply or drop")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *deletions || *reject {
		if *deletions && *reject || fs.NArg() > 0 || *all {
			fmt.Fprintf(c.stderr, "sbx: error: accept takes either --deletions or --reject-deletions, with --session NAME and nothing else\n")
			return exitUsage
		}
		return c.acceptDeletions(ctx, *sess, *reject)
	}
	if m, err := c.manager(); err == nil {
		if held, err := m.HeldDeletions(*sess); err == nil && len(held) > 0 {
			n := 0
			for _, h := range held {
				for _, f := range h.HeldFiles() {
					fmt.Fprintf(c.stdout, "%s (deleted in session %s, held: %s)\n", escape.Name(f), *sess, escape.Line(h.Reason))
					n++
				}
			}
			fmt.Fprintf(c.stdout, "apply those %d deletions with sbx accept --deletions --session %s, or drop them with --reject-deletions\n", n, *sess)
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return c.fail(err)
	}
	dirs := app.ChooseCodeDirs(codeDirs, nil, cwd)
	names := fs.Args()
	applied := 0
	for _, d := range dirs {
		d, err := filepath.Abs(d)
		if err != nil {
			return c.fail(err)
		}
		list, err := sbxsync.Quarantined(d)
		if err != nil {
			return c.fail(fmt.Errorf("read the quarantine of %s: %w", d, err))
		}
		for _, rel := range list {
			want := *all
			for _, n := range names {
				if n == rel || n == filepath.Join(d, rel) {
					want = true
				}
			}
			if !want {
				if len(names) == 0 {
					fmt.Fprintf(c.stdout, "%s (review %s)\n", escape.Name(filepath.Join(d, rel)), escape.Name(filepath.Join(d, sbxsync.QuarantineDir, rel)))
				}
				continue
			}
			if err := sbxsync.Accept(d, rel); err != nil {
				return c.fail(err)
			}
			applied++
			fmt.Fprintf(c.stdout, "accepted %s\n", escape.Name(filepath.Join(d, rel)))
		}
	}
	if len(names) > 0 && applied < len(names) {
		return c.fail(fmt.Errorf("%d of the named files are not in quarantine (sbx accept lists them)", len(names)-applied))
	}
	return 0
}

// acceptDeletions applies or drops the held deletions of a session.
func (c *cli) acceptDeletions(ctx context.Context, sess string, reject bool) int {
	m, err := c.manager()
	if err != nil {
		return c.fail(err)
	}
	res, dropped, err := m.AcceptDeletions(ctx, sess, reject, m.Params.JournalSize)
	if err != nil {
		return c.fail(err, "sbx accept --session "+sess+" lists what is held")
	}
	if reject {
		fmt.Fprintf(c.stdout, "dropped %d held deletions of session %s: the host keeps the files, and the session's next command puts them back into its sandbox\n", dropped, sess)
		return 0
	}
	for _, p := range res.Deleted {
		fmt.Fprintf(c.stdout, "deleted %s\n", escape.Name(p))
	}
	for _, p := range res.Kept {
		fmt.Fprintf(c.stdout, "kept %s (changed on the host since the sandbox deleted it)\n", escape.Name(p))
	}
	fmt.Fprintf(c.stdout, "deleted %d files; they are in the journal: sbx undo --session %s brings them back\n", len(res.Deleted), sess)
	return 0
}

// undo puts back what a session's pull-backs changed on the host.
func (c *cli) undo(ctx context.Context, args []string) int {
	fs := newFlagSet("undo", c.stderr)
	sess := fs.String("session", "default", "the session `name` whose changes to undo")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	m, err := c.manager()
	if err != nil {
		return c.fail(err)
	}
	var paths []string
	for _, p := range fs.Args() {
		abs, err := filepath.Abs(p)
		if err != nil {
			return c.fail(err)
		}
		paths = append(paths, abs)
	}
	res, err := m.Undo(ctx, *sess, paths, m.Params.JournalSize)
	if err != nil {
		return c.fail(err)
	}
	for _, p := range res.Restored {
		fmt.Fprintf(c.stdout, "restored %s\n", escape.Name(p))
	}
	for _, p := range res.Removed {
		fmt.Fprintf(c.stdout, "removed %s (the command had created it)\n", escape.Name(p))
	}
	for _, p := range res.KeptCurrent {
		fmt.Fprintf(c.stdout, "kept %s: it had changed since; that version is in the journal too (sbx undo --session %s %s brings it back)\n", escape.Name(p), *sess, escape.Name(p))
	}
	for _, p := range res.Missing {
		fmt.Fprintf(c.stderr, "sbx: not restored: %s\n", escape.Line(p))
	}
	if len(res.Restored)+len(res.Removed) == 0 {
		return c.fail(fmt.Errorf("nothing was undone"))
	}
	if len(res.Missing) > 0 {
		return exitSbxError
	}
	return 0
}
