package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sh/sbx/hostenv"
	"github.com/sbx-sh/sbx/hostrun"
)

// The host's git runs hooks from its effective core.hooksPath. When that
// names a directory inside a code dir (core.hooksPath=.githooks, husky's
// .husky/_), a hook the sandbox wrote there would run at the user's next
// git commit: the pull-back quarantines that directory (sync.HostDir.Hooks).
// The value is read from the host's own git, as git itself resolves it
// (system, global, repository and worktree config, includes, ~): sync stays
// free of exec, and a parser of ours could disagree with git.

// hooksState is what the session last read, with the stat fingerprint of the
// config files it came from: reading costs a git process, a stat costs
// microseconds, so git runs again only when a config file changed.
type hooksState struct {
	fingerprint string
	gitDirs     []string   // the repositories' git dirs, whose config counts
	files       []string   // the config files included (read or not yet there)
	hooks       [][]string // per code dir, as sync.HostDir.Hooks
}

// refreshHooks gives the sync the hooks directories of the host's git
// config, reading them again when a config file changed since the last read.
// A failure to read them is a notice, not an error: the default protected
// list still holds .githooks/ and .husky/. Called with run held (hooks and
// the sync are run's).
func (s *Session) refreshHooks(ctx context.Context) {
	fp := hooksFingerprint(s.params.CodeDirs, s.hooks.gitDirs, s.hooks.files)
	if fp == s.hooks.fingerprint && s.hooks.hooks != nil {
		return
	}
	hooks, gitDirs, files, err := readHooks(ctx, s.params.CodeDirs)
	if err != nil {
		s.m.log.Warn("read the host's git config (core.hooksPath, included files, programs it names)", "err", err)
	}
	s.hooks.gitDirs, s.hooks.files = gitDirs, files
	s.hooks.fingerprint = hooksFingerprint(s.params.CodeDirs, gitDirs, files)
	s.hooks.hooks = hooks
	for i, h := range hooks {
		if err := s.sync.SetHooks(i, h); err != nil {
			s.m.log.Warn("quarantine the host's hooks directory", "err", err)
		}
	}
}

// The git questions readHooks asks in every code dir whatever rev-parse
// answers (gitConfigPaths asks configListArgs).
var (
	hooksPathArgs  = []string{"config", "--path", "--get", "core.hooksPath"}
	configListArgs = []string{"config", "--list", "--show-origin", "-z", "--no-includes"}
)

// readHooks asks the host's git, in each code dir, where it runs hooks from,
// which config files it includes and which programs its config names
// (gitconfig.go), and places the answers inside the code dirs: hooks[i]
// lists the paths relative to code dir i (a path inside another code dir
// counts there; one through a symlink counts at both its spelling and its
// target). files are the included config files, for the fingerprint.
func readHooks(ctx context.Context, codeDirs []string) (hooks [][]string, gitDirs, files []string, err error) {
	hooks = make([][]string, len(codeDirs))
	env := hostrun.Environ(os.Environ(), codeDirs)
	git := lookPath("git", env)
	if git == "" {
		return hooks, nil, nil, fmt.Errorf("no git on the host's PATH (without the code dirs)")
	}
	var errs []string
	for _, d := range codeDirs {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		run0 := func(args ...string) (string, string, error) {
			cmd := exec.CommandContext(ctx, git, append([]string{"-c", "safe.bareRepository=explicit", "-c", "core.fsmonitor=false"}, args...)...)
			cmd.Dir, cmd.Env, cmd.Stdin = d, env, nil
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			return string(out), strings.TrimSpace(stderr.String()), err
		}
		// The questions that do not depend on rev-parse's answer start
		// beside it: each git is a few milliseconds of a new session's
		// first round. Each answer is taken once, by the call that asks
		// it; cancel ends those not taken (not a repository).
		type answer struct {
			out, stderr string
			err         error
		}
		early := map[string]chan answer{}
		for _, args := range [][]string{hooksPathArgs, configListArgs} {
			ch := make(chan answer, 1)
			early[strings.Join(args, "\x00")] = ch
			go func() {
				out, stderr, err := run0(args...)
				ch <- answer{out, stderr, err}
			}()
		}
		run := func(args ...string) (string, string, error) {
			key := strings.Join(args, "\x00")
			if ch, ok := early[key]; ok {
				delete(early, key)
				a := <-ch
				return a.out, a.stderr, a.err
			}
			return run0(args...)
		}
		// git prints the hooks directory with symlinks resolved; the
		// configured spelling (a link in the tree named in core.hooksPath)
		// must be protected too, or the sandbox could point the link at
		// hooks of its own.
		out, stderr, err := run("rev-parse", "--path-format=absolute", "--git-path", "hooks", "--git-common-dir", "--git-dir", "--show-toplevel")
		if err != nil {
			cancel()
			if !strings.Contains(stderr, "not a git repository") {
				errs = append(errs, fmt.Sprintf("%s: git rev-parse --git-path hooks: %v: %s", d, err, stderr))
			}
			continue
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 4 {
			cancel()
			errs = append(errs, fmt.Sprintf("%s: git rev-parse printed %q", d, out))
			continue
		}
		gitDirs = append(gitDirs, lines[1], lines[2])
		places := []string{filepath.Clean(lines[0])}
		if real, err := filepath.EvalSymlinks(lines[0]); err == nil && real != places[0] {
			places = append(places, real)
		}
		if v, _, err := run(hooksPathArgs...); err == nil {
			v = strings.TrimRight(v, "\n")
			if !filepath.IsAbs(v) {
				v = filepath.Join(lines[3], v)
			}
			places = append(places, filepath.Clean(v))
		}
		// Included config files and the programs the config names.
		more, included, err := gitConfigPaths(run, d, lines[3])
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", d, err))
		}
		places = append(places, more...)
		for _, f := range included {
			if !contains(files, f) {
				files = append(files, f)
			}
		}
		for _, h := range places {
			for i, cd := range codeDirs {
				roots := []string{cd}
				if real, err := filepath.EvalSymlinks(cd); err == nil && real != cd {
					roots = append(roots, real)
				}
				for _, root := range roots {
					rel, ok := inside(root, h)
					if !ok || inGitDir(rel) || contains(hooks[i], rel) {
						continue
					}
					if !protectable(rel) {
						errs = append(errs, fmt.Sprintf("%s: %q, which the host's git reads or runs, has a character the quarantine does not match (* ? [ \\): a sandbox change to it is not held", d, rel))
						continue
					}
					hooks[i] = append(hooks[i], rel)
				}
			}
		}
	}
	if len(errs) > 0 {
		return hooks, gitDirs, files, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return hooks, gitDirs, files, nil
}

// inside returns p relative to dir (slash-separated, "." for dir itself).
func inside(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// inGitDir: the default hooks directory (.git/hooks) never comes back from
// the sandbox at all.
func inGitDir(rel string) bool { return rel == ".git" || strings.HasPrefix(rel, ".git/") }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hooksFingerprint is the size, mtime and mode of every file git reads
// config from for these code dirs (system, global, each repository's config
// and config.worktree) and of each code dir's .git: a change to any of them
// reads core.hooksPath again, as does a change to a config file they
// include (files, which may not exist yet).
func hooksFingerprint(codeDirs, gitDirs, included []string) string {
	files := append([]string{"/etc/gitconfig"}, hostenv.GlobalConfigPaths()...)
	if p := os.Getenv("GIT_CONFIG_SYSTEM"); p != "" {
		files = append(files, p)
	}
	for _, d := range codeDirs {
		files = append(files, filepath.Join(d, ".git"))
	}
	for _, g := range gitDirs {
		files = append(files, filepath.Join(g, "config"), filepath.Join(g, "config.worktree"))
	}
	files = append(files, included...)
	// Asked before every command: appended, not formatted (fmt and the
	// mode's String were most of its cost).
	b := make([]byte, 0, 512)
	for _, f := range files {
		b = append(append(b, f...), ':')
		fi, err := os.Stat(f)
		if err != nil {
			b = append(b, "-;"...)
			continue
		}
		b = strconv.AppendInt(b, fi.Size(), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, fi.ModTime().UnixNano(), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(fi.Mode()), 8)
		b = append(b, ';')
	}
	return string(b)
}

// lookPath finds name on the PATH of env (the sanitized one, which holds no
// code dir), not on this process's.
func lookPath(name string, env []string) string {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	names := []string{name}
	if runtime.GOOS == "windows" {
		names = append(names, name+".exe")
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && (runtime.GOOS == "windows" || fi.Mode()&0o111 != 0) {
				return p
			}
		}
	}
	return ""
}
