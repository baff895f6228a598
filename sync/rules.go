package sync

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/sbx-sh/sbx/internal/escape"
)

// gitAllowed lists what may come back into a code dir's .git: what git writes
// to record work. Everything else there (config, hooks, info, modules,
// worktrees, commondir, alternates) can make the host run a program or read
// another repository, so it stays in the sandbox. The rebase and sequencer
// directories come back only through the quarantine (gitQuarantined).
var gitAllowedFiles = map[string]bool{
	"HEAD": true, "ORIG_HEAD": true, "FETCH_HEAD": true, "MERGE_HEAD": true, "MERGE_MSG": true,
	"MERGE_MODE": true, "MERGE_RR": true, "CHERRY_PICK_HEAD": true, "REVERT_HEAD": true,
	"REBASE_HEAD": true, "AUTO_MERGE": true, "BISECT_LOG": true, "index": true,
	"packed-refs": true, "COMMIT_EDITMSG": true, "TAG_EDITMSG": true, "SQUASH_MSG": true,
	"description": true, "shallow": true,
}

var gitAllowedDirs = []string{"objects", "refs", "logs", "rebase-merge", "rebase-apply", "sequencer", "rr-cache"}

// gitQuarantined are the parts of .git that name programs git runs later on
// the host: git-rebase-todo's exec lines and its merge strategy
// (rebase-merge/strategy runs git-merge-<name>), the same in the sequencer's
// todo and opts, and rebase-apply's am state. They pass CheckPullBack (a
// rebase stopped in the sandbox is ordinary work) but wait in quarantine
// for sbx accept, whatever the protected list says.
var gitQuarantined = []string{".git/rebase-merge", ".git/rebase-apply", ".git/sequencer"}

// Refusal says why a change from the sandbox is not applied to the host.
type Refusal struct {
	Path   string
	Reason string
}

// Error shows the path and the reason escaped: the sandbox chose the path,
// and a refusal the sandbox's helper reports (HelperReply.Kept) is its text
// entirely; both reach the user's terminal.
func (r Refusal) Error() string {
	return fmt.Sprintf("%s: %s", escape.Name(r.Path), escape.Line(r.Reason))
}

// CheckPullBack decides whether a change the sandbox made to p (an entry of
// type e, or a deletion) may be applied to the host's code dir. It returns
// nil when it may. It judges the text alone; a symlink's target must also
// pass CheckLinkTree against the tree it lands in.
func CheckPullBack(p string, e Entry, deleted bool) *Refusal {
	if err := CheckPath(p); err != nil {
		return &Refusal{p, err.Error()}
	}
	els := strings.Split(p, "/")
	for i, el := range els {
		if !isGitName(el) {
			continue
		}
		if i > 0 {
			return &Refusal{p, "a nested .git is never brought back to the host (it could carry a config that runs programs), in any spelling"}
		}
		if el != ".git" {
			return &Refusal{p, fmt.Sprintf("%s is another spelling of .git: on a case-insensitive host (macOS, Windows) it is the repository's own .git, so it is never brought back", escape.Name(el))}
		}
	}
	if els[0] != ".git" {
		if !deleted && e.isLink() {
			if why := linkText(p, e.Link); why != "" {
				return &Refusal{p, fmt.Sprintf("symlink to %s %s", escape.Name(e.Link), why)}
			}
		}
		return nil
	}
	if len(els) == 1 {
		if deleted || !e.Mode.IsDir() {
			return &Refusal{p, "the top-level .git is never removed or replaced by a file or symlink from the sandbox"}
		}
		return nil
	}
	if !deleted && e.isLink() {
		return &Refusal{p, "symlinks inside .git are never brought back"}
	}
	rest := strings.Join(els[1:], "/")
	if len(els) == 2 && gitAllowedFiles[els[1]] {
		return nil
	}
	for _, d := range gitAllowedDirs {
		if rest == d || strings.HasPrefix(rest, d+"/") {
			if f := foldPath(rest); underAlternates(f) {
				return &Refusal{p, "object alternates are never brought back (they point git at other repositories)"}
			}
			return nil
		}
	}
	return &Refusal{p, "only objects, refs, logs, HEAD, index and other git state come back into .git, never config, hooks or info"}
}

// underAlternates says whether f, a folded path below .git, is one of git's
// object alternates files or anything below one (a directory the sandbox
// makes of that name, with files in it).
func underAlternates(f string) bool {
	for _, a := range []string{"objects/info/alternates", "objects/info/http-alternates"} {
		if f == a || strings.HasPrefix(f, a+"/") {
			return true
		}
	}
	return false
}

// linkText says why the target t of a symlink at p is refused by its text
// alone, or "" when it is not: it must be relative, stay inside the tree
// that holds p, and use ".." only before its first name. The last rule is
// what makes a later link harmless: with "a/../b" allowed, a link planted
// now through a directory "a" would leave the tree once a later link
// replaced "a" ("ln -s . U; ln -s U/U/../../x k" in either order).
func linkText(p, t string) string {
	switch {
	case t == "" || strings.ContainsRune(t, 0):
		return "is empty or holds a NUL byte"
	case strings.HasPrefix(t, "/"):
		return "points outside the code directory (an absolute target)"
	}
	named := false
	for _, c := range strings.Split(t, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return `uses ".." after a name (only leading ".." are brought back: a link through a name can leave the tree once that name is a link)`
			}
		default:
			named = true
			if isGitName(c) {
				return "enters a .git directory"
			}
		}
	}
	if !linkStaysInside(p, t) {
		return "points outside the code directory"
	}
	return ""
}

// linkStaysInside reports whether a symlink at p with target t resolves, by
// its text alone, inside the tree that holds p. Absolute targets never do.
func linkStaysInside(p, t string) bool {
	if t == "" || strings.HasPrefix(t, "/") || strings.ContainsRune(t, 0) {
		return false
	}
	j := path.Join(path.Dir(p), t)
	return j != ".." && !strings.HasPrefix(j, "../")
}

// ErrLinkLeaves is a symlink whose target, followed through the links of
// the tree, leaves it or enters its .git.
var ErrLinkLeaves = errors.New("its target leaves the code directory through a symlink already there")

// maxLinkHops bounds how many links CheckLinkTree follows. A target that
// needs more resolves nowhere on any host (Linux gives ELOOP after 40,
// macOS after 32), so a loop is no way out and is brought back like any link.
const maxLinkHops = 255

// maxLinkSteps bounds the components CheckLinkTree walks for one link (each
// an Lstat on the host): a loop of long targets would otherwise cost
// millions of them per planted link. Real targets take a handful.
const maxLinkSteps = 4096

// ErrLinkTooDeep is a symlink whose target takes more than maxLinkSteps
// components to follow.
var ErrLinkTooDeep = errors.New("its target takes more than 4096 steps to follow through the tree's links")

// CheckLinkTree follows the target of a new symlink at p through the links
// of the tree it lands in: lookup(q) returns the target of the symlink at q
// (a slash path relative to the tree), or false when q is no symlink. It
// refuses a target that, resolved, leaves the tree or enters .git; a loop
// (past maxLinkHops) resolves nowhere and is accepted. Parents of p are real directories (the pull-back
// refuses writes through links), and every link the sandbox brings back
// passed linkText, so it is the host's own links (the user's) that a target
// can escape through: "ln -s out/secret k" with the user's "out -> /data".
func CheckLinkTree(p, t string, lookup func(q string) (string, bool)) error {
	cur := strings.Split(path.Dir(p), "/")
	if cur[0] == "." {
		cur = nil
	}
	pending := strings.Split(t, "/")
	for hops, steps := 0, 0; len(pending) > 0; steps++ {
		if steps > maxLinkSteps {
			return ErrLinkTooDeep
		}
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return ErrLinkLeaves
			}
			cur = cur[:len(cur)-1]
			continue
		}
		if isGitName(c) {
			return ErrLinkLeaves
		}
		next := strings.Join(append(cur[:len(cur):len(cur)], c), "/")
		if lt, ok := lookup(next); ok {
			if hops++; hops > maxLinkHops {
				return nil
			}
			if lt == "" || strings.HasPrefix(lt, "/") {
				return ErrLinkLeaves
			}
			pending = append(strings.Split(lt, "/"), pending...)
			continue
		}
		cur = append(cur, c)
	}
	return nil
}

// isGitName reports whether a path component names a git directory, in
// every spelling a case-insensitive, normalization-insensitive or Windows
// file system takes for ".git": ".GIT", ".Git", ".git." and ".git " (Windows
// drops trailing dots and spaces), ".git::$INDEX_ALLOCATION" (an NTFS
// stream), ".g\u200cit" (HFS+ ignores some code points) and the 8.3 short
// name "GIT~1".
func isGitName(c string) bool {
	f := foldName(c)
	return f == ".git" || strings.HasPrefix(f, "git~")
}

// foldName is a path component as a case-insensitive host file system
// compares it: composed to NFC (APFS and HFS+ do not tell "é" from "e" and a
// combining accent), the code points HFS+ ignores removed, Unicode full case
// folding applied (APFS folds "ﬁ" to "fi"), then every rune mapped to the
// smallest rune its upper case, lower case and simple folding reach (the
// Kelvin sign is a k on APFS; NTFS upcases a dotless ı to I), trailing dots
// and spaces dropped and an NTFS stream suffix cut off (as Windows does).
// Names that differ after folding may still be one file on some host (file
// systems fold slightly differently), but none of them folds to a different
// ASCII name.
func foldName(c string) string {
	if s, ok := foldASCII(c); ok {
		return s
	}
	return foldUnicode(c)
}

// foldUnicode is foldName's full folding, for any name.
func foldUnicode(c string) string {
	var b strings.Builder
	for _, r := range norm.NFC.String(c) {
		if hfsIgnored(r) {
			continue
		}
		b.WriteRune(r)
	}
	s := cases.Fold().String(b.String())
	b.Reset()
	for _, r := range s {
		if hfsIgnored(r) {
			continue
		}
		b.WriteRune(foldRune(r))
	}
	s = b.String()
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ". ")
}

// foldASCII is foldName of a name that is all ASCII, the common case,
// without the Unicode tables: composing, the ignored code points and full
// case folding leave ASCII as it is but for upper-case letters, which fold
// to lower case. It allocates only when the name has an upper-case letter.
// ok is false, and the name is left to the full folding, when any byte is
// not ASCII. FuzzFoldASCII holds it to the full folding.
func foldASCII(c string) (string, bool) {
	upper := false
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case b >= 0x80:
			return "", false
		case 'A' <= b && b <= 'Z':
			upper = true
		}
	}
	s := c
	if upper {
		buf := []byte(c)
		for i, b := range buf {
			if 'A' <= b && b <= 'Z' {
				buf[i] = b + 'a' - 'A'
			}
		}
		s = string(buf)
	}
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, ". "), true
}

func foldPath(p string) string {
	els := strings.Split(p, "/")
	for i, el := range els {
		els[i] = foldName(el)
	}
	return strings.Join(els, "/")
}

// foldRune maps r to the smallest rune of its case orbit: its simple
// folding orbit and those of its upper and lower case (which NTFS's upcase
// table follows: ı upcases to I), lowered when that is an ASCII letter: K, k
// and U+212A KELVIN SIGN all become k, S, s and U+017F LONG S all become s,
// ı becomes i.
func foldRune(r rune) rune {
	m := r
	for _, s := range [...]rune{r, unicode.ToUpper(r), unicode.ToLower(r), unicode.ToTitle(r)} {
		if s < m {
			m = s
		}
		for f := unicode.SimpleFold(s); f != s; f = unicode.SimpleFold(f) {
			if f < m {
				m = f
			}
		}
	}
	if m >= 'A' && m <= 'Z' {
		m += 'a' - 'A'
	}
	return m
}

// hfsIgnored: the code points HFS+ leaves out when it compares names (the
// list git's is_hfs_dotgit uses).
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}
