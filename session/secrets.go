package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/hostenv"
	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
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
	env := append(BaseEnv(tty), s.params.Env...)
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

// installGitConfig has the next round trip of the sync write the
// allowlisted global config into the sandbox's home (once per process) and
// each code dir's allowlisted .git/config (when it changed on the host, or
// not installed yet by this process): no command of its own. A config that
// cannot be read gives the sandbox an empty one. What a config renders to
// is cached in the state dir by the file's stat signature, so a later
// process of a kept session runs no git to write the same again. Called
// with run held, without mu (it runs git): gitcfg is run's.
func (s *Session) installGitConfig(ctx context.Context) {
	if s.gitcfg.repo == nil {
		s.gitcfg.repo = map[string]string{}
	}
	// The cache is read only when something is to be rendered (not on every
	// command) and written only when a render missed it.
	var cache map[string]string
	missed := false
	render := func(src, sig string, read func() ([]hostenv.KV, error), filter func([]hostenv.KV) ([]hostenv.KV, []string)) string {
		if cache == nil {
			cache = s.loadRenderCache()
		}
		if text, ok := cache[src+"\x00"+sig]; ok {
			return text
		}
		kvs, err := read()
		if err != nil {
			s.m.log.Warn("git config not readable; the sandbox gets an empty one", "config", src, "err", err)
			return ""
		}
		kept, dropped := filter(kvs)
		if len(dropped) > 0 {
			s.m.log.Debug("git config keys kept out of the sandbox", "config", src, "keys", dropped)
		}
		text, err := hostenv.Render(kept)
		if err != nil {
			return ""
		}
		for k := range cache {
			if strings.HasPrefix(k, src+"\x00") {
				delete(cache, k) // an older version of the same file
			}
		}
		cache[src+"\x00"+sig] = text
		missed = true
		return text
	}
	var files []pendingFile
	if !s.gitcfg.global {
		var sig strings.Builder
		for _, p := range hostenv.GlobalConfigPaths() {
			sig.WriteString(p + "=" + statSig(p) + ";")
		}
		text := render("global", sig.String(), func() ([]hostenv.KV, error) { return hostenv.ReadGlobalConfig(ctx) }, hostenv.FilterGlobal)
		files = append(files, pendingFile{HelperFile: sbxsync.HelperFile{Path: sandbox.Home + "/.gitconfig", Content: []byte(text)}})
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
		text := render(src, sig, func() ([]hostenv.KV, error) { return hostenv.ReadConfig(ctx, src) }, hostenv.FilterRepo)
		// A repository without its config would be wrong: required.
		files = append(files, pendingFile{HelperFile: sbxsync.HelperFile{Path: src, Content: []byte(text), Required: true}, dir: d, sig: sig})
	}
	if missed {
		// Best effort: without it a later process renders again.
		writeJSONFile(filepath.Join(s.dir, "gitconfig.json"), cache)
	}
	s.mu.Lock()
	s.pendingGit = files
	s.mu.Unlock()
}

// pendingFile is a git config file that goes into the sandbox with the next
// round trip of the sync.
type pendingFile struct {
	sbxsync.HelperFile
	dir, sig string // the code dir and its config's signature; "" for the global one
}

// gitConfigSent records what a round trip wrote, after the sandbox applied
// it: the files it could not write (only the global one can fail without
// failing the round trip) are reported. Called with run and mu held.
func (s *Session) gitConfigSent(files []pendingFile, failed []string) {
	for _, f := range files {
		if f.dir == "" {
			s.gitcfg.global = true
		} else {
			s.gitcfg.repo[f.dir] = f.sig
		}
	}
	for _, e := range failed {
		// The sandbox's git just has no identity then.
		s.note(fmt.Sprintf("git config: cannot write %s in the sandbox (is the image's home writable?)", e))
	}
}

// The render cache: state-dir/gitconfig.json, source + signature -> text
// (written by writeJSONFile). It holds only allowlisted keys, already
// filtered.
func (s *Session) loadRenderCache() map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(s.dir, "gitconfig.json")); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

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
