package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/internal/hostd"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Exec implements `sbx exec [flags] -- COMMAND...`: one command in the
// session's sandbox, its exit status passed through.
func Exec(ctx context.Context, e *Env, args []string) int { return execOrShell(ctx, e, args, false) }

// Shell implements `sbx shell [flags]`: an interactive shell in the
// session's sandbox, on the user's terminal.
func Shell(ctx context.Context, e *Env, args []string) int { return execOrShell(ctx, e, args, true) }

func execOrShell(ctx context.Context, e *Env, args []string, shell bool) int {
	oneShotGC(os.Getenv)
	name := "exec"
	if shell {
		name = "shell"
	}
	fs := NewFlagSet(name, e.Stderr)
	sess := fs.String("session", "default", "session `name`")
	keep := fs.Bool("keep", false, "keep the sandbox for later calls with the same --session")
	timeout := fs.String("timeout", "", "kill the command after this `duration` (exit 124)")
	net := fs.Bool("net", false, "share the host network (default: loopback only)")
	disk := fs.String("disk", "", "what one command may bring back and the workspace may take on the host disk, a `size` (default: the config's disk, 10GiB; 0 for none)")
	var codeDirs, hostCommands, allowNet MultiFlag
	fs.Var(&allowNet, "allow-net", "a `host` the sandbox may reach through sbx's egress proxy (repeatable; example.com, *.example.com, 10.0.0.5:8080)")
	fs.Var(&codeDirs, "code-dir", "a code `dir` to sync with the sandbox (repeatable; default: the git top level, else the current directory)")
	fs.Var(&hostCommands, "host-command", "a command `prefix` that runs on the host (repeatable; replaces the default list)")
	backend := fs.String("backend", "", "`local` or `cluster` (default: the config's backend)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	command := fs.Args()
	if !shell && len(command) == 0 {
		fmt.Fprintf(e.Stderr, "sbx: error: exec needs a command: sbx exec [flags] -- COMMAND...\n")
		return ExitUsage
	}
	if shell && len(command) > 0 {
		fmt.Fprintf(e.Stderr, "sbx: error: shell takes no command; use sbx exec\n")
		return ExitUsage
	}
	if shell && !term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprintf(e.Stderr, "sbx: error: sbx shell needs a terminal on its standard input; use sbx exec -- COMMAND for scripts\n")
		return ExitUsage
	}
	flags := app.Flags{
		CodeDirs: codeDirs, Net: *net, Timeout: *timeout, Disk: *disk,
		HostCommands: hostCommands.List(), Backend: *backend, Keep: *keep, AllowNet: allowNet.List(),
	}
	w, err := app.Setup(flags, app.PerCommand, e.Log)
	if err != nil {
		return e.Fail(err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// A kept session's later calls run through its host daemon, which
	// watches the code dirs instead of scanning them (internal/hostd).
	var daemonDir, daemonKey string
	// Local backend only so far: on the cluster a kept session's calls
	// already share the relay's exec, and the daemon is untested there.
	if *keep && w.Config.HostDaemon && w.Provider.Name() == "local" && session.CheckName(*sess) == nil {
		if root, err := session.DefaultStateRoot(); err == nil {
			daemonDir = filepath.Join(root, *sess)
			daemonKey = hostd.Key(w, daemonDir, *sess)
		}
	}
	if daemonKey != "" && !shell {
		code, err := execThroughDaemon(ctx, e, w, hostd.Call{StateDir: daemonDir, Session: *sess, Key: daemonKey,
			Command: strings.Join(command, " "), Dir: w.Cwd, Env: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr}, *sess)
		if !errors.Is(err, hostd.ErrAbsent) {
			return code
		}
		e.Log.Debug("sbx exec runs the command itself", "why", err)
	}
	if daemonKey != "" {
		// After the session's Close below (deferred later, run first).
		defer func() { hostd.Start(daemonDir, *sess, daemonKey, flags, w.Cwd, e.Log) }()
	}
	// The command runs right after Open: its scan's walk may start there.
	w.Params.Prewalk = true
	s, err := w.Manager.Open(ctx, *sess, w.Params)
	if err != nil {
		return e.Fail(err)
	}
	for _, n := range s.Notices() {
		fmt.Fprintf(e.Stderr, "sbx: note: %s\n", n)
	}
	if !s.Info().Keep {
		s.LastCommand() // released right after it: one round trip, not two
	}
	// Release (or keep) the session whatever happens below, even on a signal.
	defer func() {
		err := s.Close(context.Background())
		for _, n := range s.Notices() {
			fmt.Fprintf(e.Stderr, "sbx: note: %s\n", n)
		}
		if err != nil {
			fmt.Fprintf(e.Stderr, "sbx: error: release session %s: %v\n", *sess, err)
		}
	}()
	r := session.Run{Dir: w.Cwd, Stdout: safeOutput(os.Stdout), Stderr: safeOutput(os.Stderr), Timeout: w.Config.Timeout}
	if shell {
		restore, tty, err := rawTerminal()
		if err != nil {
			return e.Fail(err)
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
	reportSync(e.Stderr, out.Sync, *sess)
	for _, n := range s.Notices() {
		fmt.Fprintf(e.Stderr, "sbx: note: %s\n", n)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(e.Stderr, "sbx: interrupted\n")
			return 130
		}
		return e.Fail(err)
	}
	if out.TimedOut {
		fmt.Fprintf(e.Stderr, "sbx: command timed out after %s and was killed with everything it started\n", w.Config.Timeout)
	}
	return out.ExitCode
}

// execThroughDaemon runs a command through the session's host daemon, and
// reports it as execOrShell does. An error wrapping hostd.ErrAbsent means
// nothing ran.
func execThroughDaemon(ctx context.Context, e *Env, w *app.Env, c hostd.Call, sess string) (int, error) {
	rep, err := hostd.Exec(ctx, c, e.Log)
	if errors.Is(err, hostd.ErrAbsent) {
		return 0, err
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(e.Stderr, "sbx: interrupted\n")
			return 130, nil
		}
		return e.Fail(err), nil
	}
	reportSync(e.Stderr, rep.Sync, sess)
	for _, n := range rep.Notices {
		fmt.Fprintf(e.Stderr, "sbx: note: %s\n", n) // escaped by the session, as s.Notices()
	}
	if rep.Error != "" {
		if rep.Interrupted || ctx.Err() != nil {
			fmt.Fprintf(e.Stderr, "sbx: interrupted\n")
			return 130, nil
		}
		return e.Fail(errors.New(rep.Error)), nil
	}
	if rep.TimedOut {
		fmt.Fprintf(e.Stderr, "sbx: command timed out after %s and was killed with everything it started\n", w.Config.Timeout)
	}
	return rep.ExitCode, nil
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

// HostDaemon implements the hidden `sbx __hostd STATEDIR`: a kept session's
// host daemon (internal/hostd), started in the background by sbx exec.
func HostDaemon(_ context.Context, _ *Env, args []string) int { return hostd.Main(args) }
