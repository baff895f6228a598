package sync

import (
	"fmt"
	"path"
	"strings"
)

// DefaultProtected are what host tools run or trust on their own, matched as
// path components at any depth and case-insensitively (foldName). A change
// the sandbox makes to one, or to anything below one, is not applied; it is
// kept aside under .sbx/quarantine/ and reported, for the user to accept
// (sbx accept). An entry with a slash inside names consecutive components
// (".github/workflows" matches "a/.github/workflows/ci.yml"); a trailing
// slash is only a reminder that it is a directory (the name is protected as
// whatever it becomes: a planted symlink named .husky is quarantined too).
// docs/security.md gives the reason for each entry, and for the names left
// out (Makefile, package.json, AGENTS.md, ...).
var DefaultProtected = []string{
	// Agents' and editors' settings, MCP server lists, hooks and tasks.
	".claude/", ".mcp.json", ".cursor/", ".codex/", ".gemini/", ".windsurf/", ".vscode/", ".idea/",
	".zed/", ".helix/", ".continue/", ".amazonq/", ".roo/", ".kiro/", ".opencode/", "opencode.json",
	".devcontainer/", ".devcontainer.json", ".exrc", ".nvimrc", ".nvim.lua", ".vimrc", ".gvimrc",
	".qwen/", ".crush.json", "crush.json", ".crush/", ".aider.conf.yml", ".aider.conf.yaml",
	// Environment loaders that run on cd.
	".envrc", ".env", ".direnv/",
	".tool-versions", ".mise.toml", "mise.toml", ".mise.local.toml", "mise.local.toml", ".mise/",
	".config/mise/", ".config/mise.toml", ".rtx.toml",
	// What git commit and git push run.
	".githooks/", ".husky/", ".pre-commit-config.yaml", ".gitmodules", ".lfsconfig",
	// lefthook reads every one of these formats, and merges the -local
	// ones (and .lefthook-local/'s scripts) into the hooks it runs.
	"lefthook.yml", "lefthook.yaml", "lefthook.json", "lefthook.jsonc", "lefthook.toml",
	".lefthook.yml", ".lefthook.yaml", ".lefthook.json", ".lefthook.jsonc", ".lefthook.toml",
	"lefthook-local.yml", "lefthook-local.yaml", "lefthook-local.json", "lefthook-local.jsonc", "lefthook-local.toml",
	".lefthook-local.yml", ".lefthook-local.yaml", ".lefthook-local.json", ".lefthook-local.jsonc", ".lefthook-local.toml",
	".lefthook/", ".lefthook-local/",
	// Package managers' own config: what every npm or yarn command obeys.
	".npmrc", ".yarnrc", ".yarnrc.yml",
	// CI definitions (they run where the user's secrets are, after a push).
	".github/workflows/",
	// sbx's own. ".sbx/" itself is never synced (DefaultExcludes); this
	// entry catches the spellings a case-insensitive host takes for it
	// (".SBX/quarantine/x" would land in the quarantine unreported).
	".sbx.toml", ".sbxignore", ".sbx/",
}

// gitHookNames are the hooks git runs from its hooks directory: what a
// core.hooksPath naming the code dir itself exposes at its root.
var gitHookNames = map[string]bool{
	"applypatch-msg": true, "pre-applypatch": true, "post-applypatch": true, "pre-commit": true,
	"pre-merge-commit": true, "prepare-commit-msg": true, "commit-msg": true, "post-commit": true,
	"pre-rebase": true, "post-checkout": true, "post-merge": true, "pre-push": true, "pre-receive": true,
	"update": true, "proc-receive": true, "post-receive": true, "post-update": true,
	"reference-transaction": true, "push-to-checkout": true, "pre-auto-gc": true, "post-rewrite": true,
	"sendemail-validate": true, "fsmonitor-watchman": true, "p4-changelist": true,
	"p4-prepare-changelist": true, "p4-post-changelist": true, "p4-pre-submit": true,
	"post-index-change": true,
}

// protectedSet decides which sandbox changes wait in quarantine.
type protectedSet struct {
	names map[string]bool // folded one-component entries, at any depth
	seqs  [][]string      // folded entries of several components, at any depth
	// rooted are folded paths from the code dir's root: git's rebase state
	// and the hooks directories git runs (HostDir.Hooks).
	rooted [][]string
	// guards are the directories above a hooks directory: one replaced by
	// a symlink or a file would move the hooks elsewhere.
	guards [][]string
	// rootHooks: core.hooksPath names the code dir itself.
	rootHooks bool
	// linkTargets are where the host's own protected symlinks point
	// (".envrc -> env/dev.envrc"), by link path: the targets, folded, are
	// protected as the links are (targets counts them).
	linkTargets map[string]string
	targets     map[string]int
}

func newProtectedSet(entries, hooks []string) (*protectedSet, error) {
	s := &protectedSet{names: map[string]bool{}, linkTargets: map[string]string{}, targets: map[string]int{}}
	for _, e := range entries {
		els, err := protectedEntry(e)
		if err != nil {
			return nil, err
		}
		if els == nil {
			continue
		}
		if len(els) == 1 {
			s.names[els[0]] = true
		} else {
			s.seqs = append(s.seqs, els)
		}
	}
	for _, g := range gitQuarantined {
		s.rooted = append(s.rooted, strings.Split(g, "/"))
	}
	for _, h := range hooks {
		if h == "." || h == "" {
			s.rootHooks = true
			continue
		}
		els, err := protectedEntry(h)
		if err != nil {
			return nil, fmt.Errorf("hooks directory: %w", err)
		}
		s.rooted = append(s.rooted, els)
		for i := 1; i < len(els); i++ {
			s.guards = append(s.guards, els[:i])
		}
	}
	return s, nil
}

// protectedEntry splits one entry of the protected list into folded
// components. Leading "/" and "**/" are accepted (the list was once
// gitignore patterns) and mean nothing more: every entry matches at any depth.
func protectedEntry(e string) ([]string, error) {
	e = strings.TrimSpace(e)
	if e == "" || strings.HasPrefix(e, "#") {
		return nil, nil
	}
	e = strings.TrimLeft(strings.TrimPrefix(strings.TrimLeft(e, "/"), "**/"), "/")
	e = strings.TrimRight(e, "/")
	if err := CheckPath(e); err != nil || strings.ContainsAny(e, "*?[") {
		return nil, fmt.Errorf("protected entry %q must be a plain relative name or path (no globs, no ..)", e)
	}
	els := strings.Split(e, "/")
	for i, el := range els {
		els[i] = foldName(el)
	}
	return els, nil
}

// protects reports whether the sandbox's change to p (an entry e, or a
// deletion) must wait in quarantine.
func (s *protectedSet) protects(p string, e Entry, deleted bool) bool {
	els := strings.Split(p, "/")
	for i, el := range els {
		els[i] = foldName(el)
		if s.names[els[i]] || shortName(els[i]) {
			return true
		}
	}
	for _, q := range s.seqs {
		for i := 0; i+len(q) <= len(els); i++ {
			if equal(els[i:i+len(q)], q) {
				return true
			}
		}
	}
	for _, r := range s.rooted {
		if len(els) >= len(r) && equal(els[:len(r)], r) {
			return true
		}
	}
	if !deleted && !e.Mode.IsDir() {
		for _, g := range s.guards {
			if equal(els, g) {
				return true
			}
		}
	}
	if s.rootHooks && len(els) == 1 && gitHookNames[els[0]] {
		return true
	}
	if len(s.targets) > 0 {
		for k := 1; k <= len(els); k++ {
			if s.targets[strings.Join(els[:k], "/")] > 0 {
				return true
			}
		}
	}
	return false
}

// noteHostEntry follows the host's symlinks that are protected by name: what
// they point at inside the code dir (by the link's text: a target reached
// through further links is not followed) is protected too, so a sandbox edit
// of env/dev.envrc does not land when the host's .envrc points there. It is
// called with every entry of the host's manifest when the sync opens and
// with each host change after.
func (s *protectedSet) noteHostEntry(p string, e Entry, deleted bool) {
	if old, ok := s.linkTargets[p]; ok {
		delete(s.linkTargets, p)
		if s.targets[old]--; s.targets[old] <= 0 {
			delete(s.targets, old)
		}
	}
	if deleted || !e.isLink() || strings.HasPrefix(e.Link, "/") {
		return
	}
	saved := s.targets
	s.targets = nil // judge the link by its name alone
	named := s.protects(p, e, false)
	s.targets = saved
	if !named {
		return
	}
	t := path.Join(path.Dir(p), e.Link)
	if t == "." || t == ".." || strings.HasPrefix(t, "../") {
		return
	}
	t = foldPath(t)
	s.linkTargets[p] = t
	s.targets[t]++
}

// shortName: a folded component shaped like a Windows 8.3 alias ("claude~1",
// "lefth~12.yml"), which NTFS resolves to whatever long name it was made
// for, protected or not.
func shortName(el string) bool {
	i := strings.IndexByte(el, '~')
	if i < 1 || i > 6 {
		return false
	}
	rest := el[i+1:]
	if j := strings.IndexByte(rest, '.'); j >= 0 {
		if len(rest)-j-1 > 3 {
			return false
		}
		rest = rest[:j]
	}
	if rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return !strings.ContainsRune(el[:i], '.')
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SetHooks replaces the hooks directories of the code dir at index i (as
// HostDir.Hooks): the session calls it when the host's git config changed.
func (h *Host) SetHooks(i int, hooks []string) error {
	if i < 0 || i >= len(h.dirs) {
		return fmt.Errorf("no code dir %d", i)
	}
	d := h.dirs[i]
	prot := d.cfg.Protected
	if prot == nil {
		prot = DefaultProtected
	}
	pm, err := newProtectedSet(prot, hooks)
	if err != nil {
		return fmt.Errorf("%s: %w", d.cfg.Path, err)
	}
	pm.linkTargets, pm.targets = d.protected.linkTargets, d.protected.targets
	d.cfg.Hooks, d.protected = hooks, pm
	return nil
}
