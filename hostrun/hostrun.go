// Package hostrun runs a router.Plan on the host, where the user's
// credentials are.
//
// What it promises:
//   - No shell runs: every command is executed from its argument vector with
//     os/exec; echo and printf are written from the plan's rendered output.
//   - Before anything runs, the whole plan is checked again at the moment of
//     use: every directory resolves inside a code dir with no symlink below
//     it, every program is found on the host's PATH outside the code dirs, and
//     every git command (but clone) runs in the code dir's own repository.
//     A failed check runs nothing and returns a *RefusedError.
//   - git runs as "git -c core.hooksPath=/dev/null -c core.fsmonitor=false
//     -c safe.bareRepository=explicit -c protocol.file.allow=never
//     -c protocol.ext.allow=never ...", with stdin at /dev/null, no
//     controlling terminal, GIT_TERMINAL_PROMPT=0 and the host environment
//     minus the variables that redirect git (see Environ).
//   - Userinfo in URLs ("https://user:token@host") is redacted from what the
//     commands print, which goes back to the agent.
//   - Cancelling the context kills every process of the plan.
package hostrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sbx-sh/sbx/router"
)

// GitConfig is passed as "-c" options before every host git sub-command.
// Command-line configuration is "protected": it overrides the repository's
// own config, and git honours safe.bareRepository only from protected config.
var GitConfig = []string{
	// Hooks are programs in the working tree (or wherever the repository
	// config points, e.g. .husky), which the sandbox may have written.
	"core.hooksPath=/dev/null",
	// An fsmonitor hook is a program too.
	"core.fsmonitor=false",
	// Never use a bare repository found by discovery (one planted in the tree).
	"safe.bareRepository=explicit",
	// Local transports run upload-pack/receive-pack in the other repository
	// with its own config and hooks, and git strips our -c options from
	// their environment. Any repository inside the code dirs may have been
	// written by the sandbox; local repositories need no credentials anyway.
	"protocol.file.allow=never",
	// ext:: runs an arbitrary command.
	"protocol.ext.allow=never",
}

var (
	// ErrBadPlan: the plan is malformed (not what router.Decide produces).
	ErrBadPlan = errors.New("invalid plan")
	// ErrOutsideCodeDirs: a directory is outside the code dirs or passes
	// through a symlink below a code dir.
	ErrOutsideCodeDirs = errors.New("outside the code dirs")
	// ErrForeignRepository: git would use a repository other than the code
	// dir's own (a planted nested .git, a gitfile, a symlinked .git, ...).
	ErrForeignRepository = errors.New("not the code dir's own git repository")
	// ErrProgramNotFound: the program is not on the host's PATH outside the
	// code dirs.
	ErrProgramNotFound = errors.New("program not found on the host's PATH outside the code dirs")
)

// RefusedError says why a plan was refused. Nothing of the plan ran.
type RefusedError struct {
	Command string // the refused command's words, joined by spaces
	Reason  string
	Err     error // one of the Err* sentinels
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("hostrun: refused %q: %s", e.Command, e.Reason)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// root is a code dir as given and with its symlinks resolved.
type root struct{ lexical, real string }

type runner struct {
	roots  []root
	env    []string
	path   []string // PATH entries outside the code dirs
	stdout io.Writer
	stderr io.Writer
}

// prepared is a command checked and ready to start.
type prepared struct {
	cmd  router.Cmd
	path string   // program to execute; "" for builtins
	argv []string // argv[0] is the program's name
	env  []string
}

// Run executes p with the host's environment and returns the status of the
// last pipeline that ran, as a shell would. The error is a *RefusedError if
// the plan was refused (nothing ran), the context's error if it was
// cancelled, or another error if a write to stdout or stderr failed.
func Run(ctx context.Context, p *router.Plan, codeDirs []string, stdout, stderr io.Writer) (int, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if p == nil || len(p.Steps) == 0 {
		return -1, &RefusedError{Reason: "empty plan", Err: ErrBadPlan}
	}
	r := &runner{}
	for _, d := range codeDirs {
		if !filepath.IsAbs(d) {
			continue
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		r.roots = append(r.roots, root{lexical: filepath.Clean(d), real: real})
	}
	r.env = Environ(os.Environ(), codeDirs)
	for _, kv := range r.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			r.path = filepath.SplitList(v)
		}
	}

	if _, err := r.inside(p.Dir); err != nil {
		return -1, &RefusedError{Command: "cd " + p.Dir, Reason: err.Error(), Err: ErrOutsideCodeDirs}
	}
	steps := make([][]*prepared, len(p.Steps))
	for i, st := range p.Steps {
		if (i == 0) != (st.Op == "") || (i > 0 && st.Op != "&&" && st.Op != "||") || len(st.Pipeline) == 0 {
			return -1, &RefusedError{Reason: fmt.Sprintf("step %d is malformed", i), Err: ErrBadPlan}
		}
		for _, c := range st.Pipeline {
			pc, err := r.prepare(ctx, c)
			if err != nil {
				return -1, err
			}
			steps[i] = append(steps[i], pc)
		}
	}

	var mu sync.Mutex
	out := &redactor{mu: &mu, w: stdout}
	errw := &redactor{mu: &mu, w: stderr}
	r.stdout, r.stderr = out, errw
	status := 0
	var runErr error
	for i, st := range p.Steps {
		if i > 0 && ((st.Op == "&&" && status != 0) || (st.Op == "||" && status == 0)) {
			continue
		}
		status = r.pipeline(ctx, steps[i])
		if ctx.Err() != nil {
			runErr = fmt.Errorf("hostrun: %w", ctx.Err())
			break
		}
	}
	if err := errors.Join(out.flush(), errw.flush()); err != nil && runErr == nil {
		runErr = fmt.Errorf("hostrun: writing output: %w", err)
	}
	return status, runErr
}

var filterPrograms = map[string]bool{
	"grep": true, "jq": true, "head": true, "tail": true, "sort": true,
	"uniq": true, "cut": true, "tr": true, "wc": true,
}

func (r *runner) prepare(ctx context.Context, c router.Cmd) (*prepared, error) {
	shown := strings.Join(c.Words, " ")
	refuse := func(sentinel error, format string, args ...any) error {
		return &RefusedError{Command: shown, Reason: fmt.Sprintf(format, args...), Err: sentinel}
	}
	for _, s := range []router.Stream{c.Stdout, c.Stderr} {
		if s != router.StreamStdout && s != router.StreamStderr && s != router.StreamNull {
			return nil, refuse(ErrBadPlan, "unknown stream %q", s)
		}
	}
	rt, err := r.inside(c.Dir)
	if err != nil {
		return nil, refuse(ErrOutsideCodeDirs, "%v", err)
	}
	pc := &prepared{cmd: c}
	switch c.Kind {
	case router.KindBuiltin:
		return pc, nil
	case router.KindFilter:
		if len(c.Args) == 0 || !filterPrograms[c.Args[0]] {
			return nil, refuse(ErrBadPlan, "not a filter")
		}
	case router.KindHost:
		if len(c.Args) == 0 || c.Args[0] == "" || strings.ContainsAny(c.Args[0], `/\`) {
			return nil, refuse(ErrBadPlan, "host command without a plain program name")
		}
	default:
		return nil, refuse(ErrBadPlan, "unknown kind %q", c.Kind)
	}
	for _, e := range c.Env {
		if !router.IsEnvSwitch(e) {
			return nil, refuse(ErrBadPlan, "env %q is not an allowed switch", e)
		}
	}
	pc.path = r.lookPath(c.Args[0])
	if pc.path == "" {
		return nil, refuse(ErrProgramNotFound, "%s is not on the host's PATH outside the code dirs", c.Args[0])
	}
	pc.argv = c.Args
	pc.env = append(append(append([]string{}, r.env...), c.Env...), "GIT_TERMINAL_PROMPT=0")
	if c.Args[0] != "git" {
		return pc, nil
	}
	pc.argv = []string{"git"}
	for _, kv := range GitConfig {
		pc.argv = append(pc.argv, "-c", kv)
	}
	pc.argv = append(pc.argv, c.Args[1:]...)
	if c.CreatesDir != "" {
		if _, err := r.inside(filepath.Dir(c.CreatesDir)); err != nil {
			return nil, refuse(ErrOutsideCodeDirs, "clone target %s: %v", c.CreatesDir, err)
		}
		if fi, err := os.Lstat(c.CreatesDir); err == nil && !fi.IsDir() {
			return nil, refuse(ErrOutsideCodeDirs, "clone target %s exists and is not a directory", c.CreatesDir)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, refuse(ErrOutsideCodeDirs, "clone target %s: %v", c.CreatesDir, err)
		}
	}
	if c.RepoCheck {
		if err := r.repoCheck(ctx, pc, rt); err != nil {
			return nil, refuse(ErrForeignRepository, "%v", err)
		}
	} else if c.CreatesDir == "" {
		return nil, refuse(ErrBadPlan, "git command without a repository check")
	}
	return pc, nil
}

// inside checks, at the moment of use, that dir is inside a code dir and that
// resolving its symlinks changes nothing below the code dir.
func (r *runner) inside(dir string) (root, error) {
	if !filepath.IsAbs(dir) {
		return root{}, fmt.Errorf("%q is not absolute", dir)
	}
	clean := filepath.Clean(dir)
	var best root
	for _, rt := range r.roots {
		if (clean == rt.lexical || strings.HasPrefix(clean, rt.lexical+string(filepath.Separator))) &&
			len(rt.lexical) > len(best.lexical) {
			best = rt
		}
	}
	if best.lexical == "" {
		return root{}, fmt.Errorf("%q is outside the code dirs", dir)
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return root{}, fmt.Errorf("%q: %w", dir, err)
	}
	if want := best.real + strings.TrimPrefix(clean, best.lexical); real != want {
		return root{}, fmt.Errorf("%q resolves to %q: it passes through a symlink", dir, real)
	}
	return best, nil
}

// repoCheck runs "git rev-parse --absolute-git-dir" in the command's
// directory and requires the code dir's own .git directory.
func (r *runner) repoCheck(ctx context.Context, pc *prepared, rt root) error {
	want := filepath.Join(rt.real, ".git")
	if fi, err := os.Lstat(want); err != nil || !fi.IsDir() {
		return fmt.Errorf("code dir %s has no .git directory of its own", rt.lexical)
	}
	args := []string{}
	for _, kv := range GitConfig {
		args = append(args, "-c", kv)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, pc.path, append(args, "rev-parse", "--absolute-git-dir")...)
	cmd.Args[0] = "git"
	cmd.Dir = pc.cmd.Dir
	cmd.Env = pc.env
	setProcAttrs(cmd)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git rev-parse --absolute-git-dir in %s: %w", pc.cmd.Dir, err)
	}
	got := strings.TrimSpace(string(out))
	if real, err := filepath.EvalSymlinks(got); err == nil {
		got = real
	}
	if got != want {
		return fmt.Errorf("git in %s uses the repository %s, not the code dir's own %s", pc.cmd.Dir, got, want)
	}
	return nil
}

// lookPath finds name in the sanitized PATH (which holds no code dir).
func (r *runner) lookPath(name string) string {
	names := []string{name}
	if runtime.GOOS == "windows" {
		names = append(names, name+".exe")
	}
	for _, dir := range r.path {
		for _, n := range names {
			p := filepath.Join(dir, n)
			fi, err := os.Stat(p)
			if err == nil && fi.Mode().IsRegular() && (runtime.GOOS == "windows" || fi.Mode()&0o111 != 0) {
				return p
			}
		}
	}
	return ""
}

// pipeline runs one pipeline and returns the status of its last command.
func (r *runner) pipeline(ctx context.Context, cmds []*prepared) int {
	n := len(cmds)
	readers := make([]*os.File, n) // stdin of command i (nil: /dev/null)
	writers := make([]*os.File, n) // pipe to command i+1
	for i := 0; i < n-1; i++ {
		pr, pw, err := os.Pipe()
		if err != nil {
			fmt.Fprintf(r.stderr, "sbx: pipe: %v\n", err)
			for _, f := range append(readers, writers...) {
				if f != nil {
					f.Close()
				}
			}
			return 126
		}
		writers[i], readers[i+1] = pw, pr
	}
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i, pc := range cmds {
		own := io.Writer(r.stdout)
		if writers[i] != nil {
			own = writers[i]
		}
		target := func(s router.Stream) io.Writer {
			switch s {
			case router.StreamStdout:
				return own
			case router.StreamStderr:
				return r.stderr
			}
			return nil
		}
		if pc.cmd.Kind == router.KindBuiltin {
			wg.Add(1)
			go func(w io.Writer, out string, pw, in *os.File) {
				defer wg.Done()
				if w != nil {
					io.WriteString(w, out) // a reader that stopped reading is not an error
				}
				if pw != nil {
					pw.Close()
				}
				if in != nil {
					in.Close()
				}
			}(target(pc.cmd.Stdout), pc.cmd.Output, writers[i], readers[i])
			continue
		}
		c := exec.CommandContext(ctx, pc.path, pc.argv[1:]...)
		c.Args[0] = pc.argv[0]
		c.Dir = pc.cmd.Dir
		c.Env = pc.env
		if readers[i] != nil {
			c.Stdin = readers[i]
		}
		c.Stdout = target(pc.cmd.Stdout)
		c.Stderr = target(pc.cmd.Stderr)
		c.WaitDelay = 5 * time.Second
		setProcAttrs(c)
		err := c.Start()
		if readers[i] != nil {
			readers[i].Close()
		}
		if writers[i] != nil {
			writers[i].Close()
		}
		if err != nil {
			fmt.Fprintf(r.stderr, "sbx: %s: %v\n", pc.argv[0], err)
			statuses[i] = 126
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c.Wait()
			statuses[i] = exitStatus(c.ProcessState)
		}(i)
	}
	wg.Wait()
	return statuses[n-1]
}
