package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/hostenv"
	"github.com/sbx-sh/sbx/sandbox"
)

// What of the host's secrets and settings enters the sandbox, and only this:
// the environment variables the user forwards by name or glob (minus the
// skip list and the names hostenv reserves), and git config keys from an
// exact allowlist. The code dirs' own .git/config never travels with the
// sync; the sandbox's is written here from the allowlist, again whenever the
// host's changes and once per process (so a reused sandbox gets it anew).

// commandEnv is the environment of one command: the fixed base, then what
// is forwarded from the host now. A variable forwarded earlier and dropped
// since (from the host or from the list) is simply absent: nothing persists
// between commands.
func (s *Session) commandEnv(tty bool, extra []string) []string {
	env := BaseEnv(tty)
	if len(s.params.ForwardEnv) > 0 {
		fwd, refused, err := hostenv.Forward(os.Environ(), s.params.ForwardEnv, s.params.EnvSkip)
		if err != nil {
			s.note(fmt.Sprintf("forward_env: %v; nothing forwarded", err))
		} else {
			env = append(env, fwd...)
			if len(refused) > 0 && !s.warnedRefused {
				s.warnedRefused = true
				s.note("forward_env: never forwarded: " + strings.Join(refused, ", "))
			}
		}
	}
	return append(env, extra...)
}

// gitConfigState remembers what was installed, to reinstall on change.
type gitConfigState struct {
	global bool
	repo   map[string]string // code dir -> stat signature of its .git/config
}

func statSig(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d:%d", fi.Size(), fi.ModTime().UnixNano())
}

// installGitConfig writes the allowlisted global config into the sandbox's
// home (once per process) and each code dir's allowlisted .git/config
// (when it changed on the host, or not installed yet by this process). A
// config that cannot be read gives the sandbox an empty one.
func (s *Session) installGitConfig(ctx context.Context, sb sandbox.Sandbox) error {
	if s.gitcfg.repo == nil {
		s.gitcfg.repo = map[string]string{}
	}
	write := func(dst, content string) error {
		var out strings.Builder
		res, err := sb.Exec(ctx, &sandbox.Cmd{
			Argv:  []string{"/bin/sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "sbx", dst},
			Env:   BaseEnv(false),
			Stdin: strings.NewReader(content), Stdout: &out, Stderr: &out,
		})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(out.String()))
		}
		if err != nil {
			return fmt.Errorf("write %s in the sandbox: %w", dst, err)
		}
		return nil
	}
	render := func(kvs []hostenv.KV, err error, filter func([]hostenv.KV) ([]hostenv.KV, []string), what string) string {
		if err != nil {
			s.m.log.Warn("git config not readable; the sandbox gets an empty one", "config", what, "err", err)
			return ""
		}
		kept, dropped := filter(kvs)
		if len(dropped) > 0 {
			s.m.log.Debug("git config keys kept out of the sandbox", "config", what, "keys", dropped)
		}
		text, err := hostenv.Render(kept)
		if err != nil {
			return ""
		}
		return text
	}
	if !s.gitcfg.global {
		kvs, err := hostenv.ReadGlobalConfig(ctx)
		if err := write(sandboxHome+"/.gitconfig", render(kvs, err, hostenv.FilterGlobal, "global")); err != nil {
			// Not fatal: the sandbox's git just has no identity then.
			s.note(fmt.Sprintf("git config: %v", err))
		}
		s.gitcfg.global = true
	}
	for _, d := range s.params.CodeDirs {
		gitDir := filepath.Join(d, ".git")
		if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
			continue
		}
		src := filepath.Join(gitDir, "config")
		sig := statSig(src)
		if s.gitcfg.repo[d] == sig {
			continue
		}
		kvs, err := hostenv.ReadConfig(ctx, src)
		if err := write(src, render(kvs, err, hostenv.FilterRepo, src)); err != nil {
			return err
		}
		s.gitcfg.repo[d] = sig
	}
	return nil
}

const sandboxHome = "/home/sbx"

// neverPushed are code-dir paths the sync never sends into the sandbox (nor
// brings back): the sandbox's copies are written from allowlists instead.
var neverPushed = []string{"/.git/config", "/.git/config.worktree"}

func (s *Session) syncPathCopy(i int) string {
	return filepath.Join(s.dir, "paths", fmt.Sprint(i))
}

// copySyncPaths snapshots the sync paths into the state directory, from
// where they are mounted read-only: the sandbox never writes the host's.
func (s *Session) copySyncPaths() error {
	os.RemoveAll(filepath.Join(s.dir, "paths"))
	for i, p := range s.params.SyncPaths {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("sync path %s: %w", p, err)
		}
		dst := s.syncPathCopy(i)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if fi.IsDir() {
			err = os.CopyFS(dst, os.DirFS(p))
		} else {
			var b []byte
			if b, err = os.ReadFile(p); err == nil {
				err = os.WriteFile(dst, b, fi.Mode().Perm())
			}
		}
		if err != nil {
			return fmt.Errorf("copy sync path %s into the sandbox: %w", p, err)
		}
	}
	return nil
}
