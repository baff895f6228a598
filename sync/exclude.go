package sync

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// DefaultExcludes are never synced in either direction: sbx's own files,
// caches that tools rebuild, and temporary files of a write in progress.
// Files a command creates under an excluded path stay in the sandbox.
var DefaultExcludes = []string{
	"/.sbx/",
	".sbx-tmp-*",
	"node_modules/.cache/",
	"__pycache__/",
	".pytest_cache/",
	".mypy_cache/",
	".git/index.lock",
	".DS_Store",
}

// Matcher decides which paths are excluded, with gitignore semantics: a
// pattern without a slash (other than a trailing one) matches a name at any
// depth; a leading slash anchors it at the root; a trailing slash matches only
// directories; `!` re-includes; the last matching pattern wins; what is below
// an excluded directory is excluded. Patterns use doublestar globs (`**`).
type Matcher struct {
	rules []rule
}

type rule struct {
	glob    string
	negate  bool
	dirOnly bool
	// kind and lit match the common shapes without the glob machinery:
	// every scan asks each rule about every entry of the tree.
	kind matchKind
	lit  string
}

// matchKind is how a rule's glob is matched.
type matchKind uint8

const (
	matchGlob     matchKind = iota // doublestar
	matchExact                     // a path without metacharacters: p == lit
	matchBase                      // **/NAME: the last element is lit
	matchBasePref                  // **/PREFIX*: the last element begins with lit
)

// kindOf finds the shape of glob (see matchKind). Only an ASCII glob takes
// a fast shape: doublestar compares runes, and takes any two bytes that are
// not UTF-8 for the same rune (U+FFFD), where a comparison of bytes would
// not; no ASCII byte is ever part of such a rune.
func kindOf(glob string) (matchKind, string) {
	const meta = `*?[]{}\`
	for i := 0; i < len(glob); i++ {
		if glob[i] >= 0x80 {
			return matchGlob, ""
		}
	}
	if !strings.ContainsAny(glob, meta) {
		return matchExact, glob
	}
	rest, ok := strings.CutPrefix(glob, "**/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return matchGlob, ""
	}
	if !strings.ContainsAny(rest, meta) {
		return matchBase, rest
	}
	if pre, ok := strings.CutSuffix(rest, "*"); ok && pre != "" && !strings.ContainsAny(pre, meta) {
		return matchBasePref, pre
	}
	return matchGlob, ""
}

// match reports whether the rule's glob matches p, as
// doublestar.MatchUnvalidated(r.glob, p) does.
func (r *rule) match(p string) bool {
	switch r.kind {
	case matchExact:
		return p == r.lit
	case matchBase, matchBasePref:
		base := p[strings.LastIndexByte(p, '/')+1:]
		if r.kind == matchBase {
			return base == r.lit
		}
		return strings.HasPrefix(base, r.lit)
	}
	return doublestar.MatchUnvalidated(r.glob, p)
}

// NewMatcher compiles patterns (gitignore lines; blank lines and # comments
// are skipped).
func NewMatcher(patterns []string) (*Matcher, error) {
	m := &Matcher{}
	for _, p := range patterns {
		p = strings.TrimRight(p, " \t\r")
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		r := rule{}
		if strings.HasPrefix(p, "!") {
			r.negate, p = true, p[1:]
		} else if strings.HasPrefix(p, `\`) {
			p = p[1:]
		}
		if strings.HasSuffix(p, "/") {
			r.dirOnly, p = true, strings.TrimRight(p, "/")
		}
		if p == "" {
			continue
		}
		if strings.HasPrefix(p, "/") {
			p = strings.TrimLeft(p, "/")
		} else if !strings.Contains(p, "/") {
			p = "**/" + p
		}
		if !doublestar.ValidatePattern(p) {
			return nil, fmt.Errorf("bad exclude pattern %q", p)
		}
		r.glob = p
		r.kind, r.lit = kindOf(p)
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// ParseIgnore splits a .sbxignore file into patterns.
func ParseIgnore(content string) []string {
	return strings.Split(content, "\n")
}

// Excluded reports whether the path (slash-separated, relative) is excluded,
// given that none of its parent directories is.
func (m *Matcher) Excluded(p string, isDir bool) bool {
	if m == nil {
		return false
	}
	excluded := false
	for _, r := range m.rules {
		if r.dirOnly && !isDir {
			continue
		}
		if r.match(p) {
			excluded = !r.negate
		}
	}
	return excluded
}

// ExcludedPath reports whether p or any of its parent directories is
// excluded: what the walker would have skipped.
func (m *Matcher) ExcludedPath(p string, isDir bool) bool {
	if m == nil {
		return false
	}
	els := strings.Split(p, "/")
	for i := 1; i < len(els); i++ {
		if m.Excluded(strings.Join(els[:i], "/"), true) {
			return true
		}
	}
	return m.Excluded(p, isDir)
}
