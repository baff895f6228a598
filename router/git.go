package router

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// hostCommand matches a command against the listed host commands and fills
// in c. Non-git entries are matched word by word from the first word; their
// arguments are the user's to trust (the router knows no option of theirs).
func (w *walker) hostCommand(dir location, c *Cmd, assigns []*syntax.Assign) *refusal {
	name := c.Words[0]
	if strings.ContainsRune(name, '/') {
		return refuse("path-qualified program %s is never run on the host", quote(name))
	}
	if name == "git" {
		return w.gitCommand(dir, c, assigns)
	}
	var best []string
	for _, p := range w.prefixes {
		if hasPrefix(c.Words, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == nil {
		return refuse("%s is not a listed host command", quote(name))
	}
	if len(assigns) > 0 {
		return refuse("env prefixes are accepted only on git commands")
	}
	if r := w.checkPathArgs(dir, c.Words[len(best):]); r != nil {
		return r
	}
	c.Kind, c.Args, c.Prefix = KindHost, c.Words, strings.Join(best, " ")
	w.matched = append(w.matched, c.Prefix)
	return nil
}

// gitGlobalFlags are the git options accepted before the sub-command, besides
// "-C DIR". Everything else there (-c, --config-env, --git-dir, --work-tree,
// --exec-path, -p/--paginate, --namespace, --bare, ...) is refused.
var gitGlobalFlags = map[string]bool{
	"--no-pager": true, "-P": true, "--no-optional-locks": true, "--no-replace-objects": true,
}

func (w *walker) gitCommand(base location, c *Cmd, assigns []*syntax.Assign) *refusal {
	words := c.Words
	dir := base
	args := []string{"git"}
	i, seenC := 1, false
	for i < len(words) && strings.HasPrefix(words[i], "-") {
		switch a := words[i]; {
		case a == "-C":
			if seenC {
				return refuse("git -C may be given only once on the host")
			}
			if i+1 >= len(words) {
				return refuse("git -C needs a directory")
			}
			d, r := w.resolve(dir, words[i+1], mustBeDir, "git -C directory")
			if r != nil {
				return r
			}
			dir, seenC = d, true
			i += 2
		case gitGlobalFlags[a]:
			args = append(args, a)
			i++
		default:
			return refuse("git option %s before the sub-command is not allowed on the host", quote(optName(a)))
		}
	}
	rest := words[i:]
	var best []string
	for _, p := range w.prefixes {
		if p[0] == "git" && hasPrefix(rest, p[1:]) && len(p) > len(best) {
			best = p
		}
	}
	if best == nil {
		shown := "git"
		if len(rest) > 0 {
			shown += " " + rest[0]
		}
		return refuse("%s is not a listed host command", quote(shown))
	}
	sub := gitSubcommand(rest)
	spec := gitSpecs[sub]
	if spec == nil {
		return refuse("the router has no option allowlist for git %s", quote(strings.Join(rest[:1], " ")))
	}
	env, r := envSwitches(assigns)
	if r != nil {
		return r
	}
	nsub := len(strings.Fields(sub))
	pos, seen, r := parseGitOptions(spec, sub, rest[nsub:])
	if r != nil {
		return r
	}
	c.Args = append(args, rest...)
	c.Dir = dir.abs()
	if r := spec.positionals(w, dir, pos, seen, c); r != nil {
		return r
	}
	if sub != "clone" {
		if r := nestedRepo(dir); r != nil {
			return r
		}
		c.RepoCheck = true
	}
	c.Kind, c.Env, c.Prefix = KindHost, env, strings.Join(best, " ")
	w.matched = append(w.matched, c.Prefix)
	return nil
}

// gitEnvSwitches are the variables accepted as an env prefix of a host git
// command, each only with the value 0, 1, true or false: for all of them those
// values mean off, or on with output to stderr. GIT_TRACE=/path (a file) or
// =5 (an fd) is refused by the value check. GIT_TRACE_REDACT is not here:
// switching redaction off would print credentials.
var gitEnvSwitches = map[string]bool{
	"GIT_TRACE": true, "GIT_TRACE_PACKET": true, "GIT_TRACE_PERFORMANCE": true,
	"GIT_TRACE_SETUP": true, "GIT_TRACE_CURL": true, "GIT_TRACE_CURL_NO_DATA": true,
	"GIT_TRACE_SHALLOW": true, "GIT_TRACE_PACK_ACCESS": true, "GIT_TERMINAL_PROMPT": true,
	"GIT_FLUSH": true, "GIT_OPTIONAL_LOCKS": true, "GIT_ADVICE": true,
}

// IsEnvSwitch reports whether "NAME=VALUE" is an env switch the router accepts
// in front of a host git command.
func IsEnvSwitch(nameValue string) bool {
	name, value, ok := strings.Cut(nameValue, "=")
	return ok && gitEnvSwitches[name] && isSwitchValue(value)
}

func isSwitchValue(v string) bool {
	return v == "0" || v == "1" || v == "true" || v == "false"
}

func envSwitches(assigns []*syntax.Assign) ([]string, *refusal) {
	var env []string
	for _, a := range assigns {
		v, r := unquote(a.Value)
		if r != nil {
			return nil, r
		}
		if !gitEnvSwitches[a.Name.Value] {
			return nil, refuse("env prefix %s is not an allowed on/off switch", a.Name.Value)
		}
		if !isSwitchValue(v) {
			return nil, refuse("env prefix %s=%s is not an on/off switch (0, 1, true, false)", a.Name.Value, quote(v))
		}
		env = append(env, a.Name.Value+"="+v)
	}
	return env, nil
}

// optArg is how a git option takes a value.
type optArg int

const (
	argNone     optArg = iota // a flag
	argRequired               // "--opt=V", "--opt V", "-oV", "-o V"
	argOptional               // only attached: "--opt=V", "-oV"
)

// gitOpt is one allowlisted option of a sub-command. Git also accepts unique
// prefixes of long options ("--rec" for "--receive-pack"); the router accepts
// only the full spellings listed, so no abbreviation of anything slips through.
type gitOpt struct {
	long  string // without "--"; empty for a short-only option
	short byte   // 0 for a long-only option
	arg   optArg
	ok    func(v string) bool // checks the value; nil means any value
}

type gitSpec struct {
	opts        []gitOpt
	positionals func(w *walker, dir location, pos []string, seen map[string]bool, c *Cmd) *refusal
}

func (s *gitSpec) long(name string) *gitOpt {
	for i := range s.opts {
		if s.opts[i].long != "" && s.opts[i].long == name {
			return &s.opts[i]
		}
	}
	return nil
}

func (s *gitSpec) shortOpt(b byte) *gitOpt {
	for i := range s.opts {
		if s.opts[i].short != 0 && s.opts[i].short == b {
			return &s.opts[i]
		}
	}
	return nil
}

func oneOf(vals ...string) func(string) bool {
	return func(v string) bool { return contains(vals, v) }
}

func digitsOrEmpty(v string) bool { return v == "" || isDigits(v) }

func flag(long string, short byte) gitOpt { return gitOpt{long: long, short: short} }
func value(long string, short byte, ok func(string) bool) gitOpt {
	return gitOpt{long: long, short: short, arg: argRequired, ok: ok}
}
func optional(long string, short byte, ok func(string) bool) gitOpt {
	return gitOpt{long: long, short: short, arg: argOptional, ok: ok}
}

// Options common to fetch and pull that only shape what is fetched.
var fetchShaping = []gitOpt{
	flag("all", 0), flag("append", 'a'), flag("force", 'f'), flag("tags", 't'),
	flag("no-tags", 0), flag("prune", 'p'), flag("no-prune", 0), flag("dry-run", 0),
	flag("keep", 'k'), value("depth", 0, isDigits), value("shallow-since", 0, nil),
	value("shallow-exclude", 0, nil), value("deepen", 0, isDigits), flag("unshallow", 0),
	flag("update-shallow", 0), value("refmap", 0, nil), value("server-option", 'o', nil),
	flag("ipv4", '4'), flag("ipv6", '6'), value("negotiation-tip", 0, nil),
	flag("show-forced-updates", 0), flag("no-show-forced-updates", 0), flag("set-upstream", 0),
	flag("verbose", 'v'), flag("quiet", 'q'), flag("progress", 0), flag("no-progress", 0),
	optional("recurse-submodules", 0, oneOf("no")), flag("no-recurse-submodules", 0),
}

var gitSpecs = map[string]*gitSpec{
	"push": {
		opts: []gitOpt{
			flag("verbose", 'v'), flag("quiet", 'q'), flag("all", 0), flag("branches", 0),
			flag("mirror", 0), flag("delete", 'd'), flag("tags", 0), flag("dry-run", 'n'),
			flag("porcelain", 0), flag("force", 'f'), optional("force-with-lease", 0, nil),
			flag("no-force-with-lease", 0), flag("force-if-includes", 0),
			flag("no-force-if-includes", 0), value("recurse-submodules", 0, oneOf("check", "no")),
			flag("no-recurse-submodules", 0), flag("thin", 0), flag("no-thin", 0),
			flag("set-upstream", 'u'), flag("progress", 0), flag("no-progress", 0),
			flag("prune", 0), flag("no-verify", 0), flag("verify", 0), flag("follow-tags", 0),
			flag("no-follow-tags", 0), flag("atomic", 0), flag("no-atomic", 0),
			value("push-option", 'o', nil), flag("ipv4", '4'), flag("ipv6", '6'),
		},
		positionals: remoteThenRefspecs,
	},
	"fetch": {
		opts: append([]gitOpt{
			flag("multiple", 'm'), flag("atomic", 0), value("jobs", 'j', isDigits),
			flag("prefetch", 0), flag("prune-tags", 'P'), flag("porcelain", 0),
			flag("write-fetch-head", 0), flag("no-write-fetch-head", 0), flag("refetch", 0),
			flag("negotiate-only", 0), value("filter", 0, nil), flag("no-auto-maintenance", 0),
			flag("no-auto-gc", 0), flag("write-commit-graph", 0), flag("no-write-commit-graph", 0),
			{short: 'n'}, // --no-tags
		}, fetchShaping...),
		positionals: remoteThenRefspecs,
	},
	"pull": {
		opts: append([]gitOpt{
			optional("rebase", 'r', oneOf("", "true", "false", "merges")), flag("no-rebase", 0),
			{short: 'n'}, // --no-stat
			flag("stat", 0), flag("no-stat", 0), optional("log", 0, digitsOrEmpty), flag("no-log", 0),
			optional("signoff", 0, oneOf("")), flag("no-signoff", 0), flag("squash", 0),
			flag("no-squash", 0), flag("commit", 0), flag("no-commit", 0), flag("no-edit", 0),
			value("cleanup", 0, oneOf("strip", "whitespace", "verbatim", "scissors", "default")),
			flag("ff", 0), flag("no-ff", 0), flag("ff-only", 0), flag("verify", 0),
			flag("no-verify", 0), flag("autostash", 0), flag("no-autostash", 0),
			flag("allow-unrelated-histories", 0), optional("jobs", 'j', digitsOrEmpty),
		}, fetchShaping...),
		positionals: remoteThenRefspecs,
	},
	"ls-remote": {
		opts: []gitOpt{
			flag("quiet", 'q'), flag("tags", 't'), flag("heads", 'h'), flag("branches", 'b'),
			flag("refs", 0), value("sort", 0, nil), flag("exit-code", 0), flag("symref", 0),
			value("server-option", 'o', nil),
		},
		positionals: remoteThenRefspecs,
	},
	"clone": {
		opts: []gitOpt{
			flag("verbose", 'v'), flag("quiet", 'q'), flag("progress", 0), flag("no-progress", 0),
			flag("reject-shallow", 0), flag("no-reject-shallow", 0), flag("no-checkout", 'n'),
			flag("sparse", 0), value("jobs", 'j', isDigits), value("origin", 'o', isRemoteName),
			value("branch", 'b', nil), value("revision", 0, nil), value("depth", 0, isDigits),
			value("shallow-since", 0, nil), value("shallow-exclude", 0, nil),
			flag("single-branch", 0), flag("no-single-branch", 0), flag("no-tags", 0),
			value("server-option", 0, nil), flag("ipv4", '4'), flag("ipv6", '6'),
			value("filter", 0, nil), value("ref-format", 0, oneOf("files", "reftable")),
		},
		positionals: clonePositionals,
	},
	"remote add": {
		opts: []gitOpt{
			flag("fetch", 'f'), flag("tags", 0), flag("no-tags", 0), value("track", 't', nil),
			value("master", 'm', nil), optional("mirror", 0, oneOf("fetch", "push")),
		},
		positionals: func(w *walker, dir location, pos []string, seen map[string]bool, c *Cmd) *refusal {
			if len(pos) != 2 {
				return refuse("git remote add takes a name and a URL")
			}
			if !isRemoteName(pos[0]) {
				return refuse("remote name %s is not a plain name", quote(pos[0]))
			}
			return checkURL(pos[1])
		},
	},
	"remote set-url": {
		opts: []gitOpt{flag("push", 0), flag("add", 0), flag("delete", 0)},
		positionals: func(w *walker, dir location, pos []string, seen map[string]bool, c *Cmd) *refusal {
			max := 3
			if seen["add"] || seen["delete"] {
				max = 2
			}
			if len(pos) < 2 || len(pos) > max {
				return refuse("git remote set-url takes a name, a URL and at most an old URL")
			}
			if !isRemoteName(pos[0]) {
				return refuse("remote name %s is not a plain name", quote(pos[0]))
			}
			if seen["delete"] {
				return nil // a pattern of URLs to delete, not a URL
			}
			return checkURL(pos[1])
		},
	},
}

// parseGitOptions walks the arguments after the sub-command the way git's
// parse-options does (options may follow positionals; "--" and
// "--end-of-options" end them; short options bundle and take attached values)
// and refuses any option not in the allowlist.
func parseGitOptions(spec *gitSpec, sub string, args []string) ([]string, map[string]bool, *refusal) {
	var pos []string
	seen := map[string]bool{}
	done := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if done || a == "" || a[0] != '-' {
			if strings.HasPrefix(a, "-") {
				return nil, nil, refuse("git %s argument %s looks like an option", sub, quote(a))
			}
			pos = append(pos, a)
			continue
		}
		if a == "--" || a == "--end-of-options" {
			done = true
			continue
		}
		if a == "-" {
			return nil, nil, refuse("git %s argument \"-\" is not allowed on the host", sub)
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a[2:], "=")
			o := spec.long(name)
			if o == nil {
				return nil, nil, refuse("git %s option %s is not allowed on the host", sub, quote("--"+name))
			}
			switch o.arg {
			case argNone:
				if hasVal {
					return nil, nil, refuse("git %s option %s takes no value", sub, quote("--"+name))
				}
			case argRequired:
				if !hasVal {
					if i+1 >= len(args) {
						return nil, nil, refuse("git %s option %s needs a value", sub, quote("--"+name))
					}
					i++
					val = args[i]
				}
			}
			if o.arg != argNone && o.ok != nil && !o.ok(val) {
				return nil, nil, refuse("git %s option %s value %s is not allowed on the host", sub, quote("--"+name), quote(val))
			}
			seen[name] = true
			continue
		}
		for j := 1; j < len(a); j++ {
			o := spec.shortOpt(a[j])
			if o == nil {
				return nil, nil, refuse("git %s option %s is not allowed on the host", sub, quote("-"+a[j:j+1]))
			}
			if o.long != "" {
				seen[o.long] = true
			}
			if o.arg == argNone {
				continue
			}
			val := a[j+1:]
			if val == "" && o.arg == argRequired {
				if i+1 >= len(args) {
					return nil, nil, refuse("git %s option %s needs a value", sub, quote("-"+a[j:j+1]))
				}
				i++
				val = args[i]
			}
			if o.ok != nil && !o.ok(val) {
				return nil, nil, refuse("git %s option %s value %s is not allowed on the host", sub, quote("-"+a[j:j+1]), quote(val))
			}
			break
		}
	}
	return pos, seen, nil
}

// remoteThenRefspecs checks "[<repository> [<refspec>...]]" (push, fetch,
// pull, ls-remote); with fetch --multiple every positional is a repository.
func remoteThenRefspecs(w *walker, dir location, pos []string, seen map[string]bool, c *Cmd) *refusal {
	for i, p := range pos {
		if i == 0 || seen["multiple"] {
			if r := checkRemote(dir, p); r != nil {
				return r
			}
		}
	}
	return nil
}

// checkRemote accepts a remote name or a network URL. Git treats a name that
// is not a configured remote as a path, so a name that exists as a file or
// directory here (as NAME or NAME.git) is refused: local repositories need no
// credentials, and the host must not run git against one the sandbox wrote.
func checkRemote(dir location, s string) *refusal {
	if !isRemoteName(s) {
		return checkURL(s)
	}
	for _, cand := range []string{s, s + ".git"} {
		if _, err := os.Lstat(dir.abs() + "/" + cand); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return refuse("%s is a local path; local repositories need no credentials and run in the sandbox", quote(s))
		}
	}
	return nil
}

func isRemoteName(s string) bool {
	return isPlainWord(s) && !strings.Contains(s, "+") && s != "."
}

// networkSchemes are the URL schemes git handles itself over the network.
// Any other "scheme://" makes git run git-remote-<scheme>; file:// is local.
var networkSchemes = map[string]bool{
	"https": true, "http": true, "ssh": true, "git": true, "git+ssh": true, "ssh+git": true,
}

// checkURL accepts only network URLs git handles itself: https, http, ssh,
// git and scp-like user@host:path. It refuses transport helpers ("ext::",
// "fd::", "x::"), unknown schemes (which run git-remote-<scheme>), file:// and
// local paths (which need no credentials, and which host git would run with
// the target repository's own config and hooks), and ssh hosts or users that
// begin with "-" (which ssh would read as options).
func checkURL(s string) *refusal {
	if s == "" || s[0] == '-' {
		return refuse("remote %s looks like an option", quote(s))
	}
	if strings.Contains(s, "::") {
		return refuse("remote %s uses a transport helper (ext::, fd::, ...), which runs programs", quote(s))
	}
	if i := strings.Index(s, "://"); i >= 0 && isScheme(s[:i]) {
		scheme := s[:i]
		if scheme == "file" {
			return refuse("remote %s is a local path; local repositories need no credentials and run in the sandbox", quote(s))
		}
		if !networkSchemes[scheme] {
			return refuse("remote %s uses scheme %s, which runs git-remote-%s", quote(s), quote(scheme), scheme)
		}
		auth := s[i+3:]
		if j := strings.IndexByte(auth, '/'); j >= 0 {
			auth = auth[:j]
		}
		return checkAuthority(s, auth, true)
	}
	colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/')
	if colon > 0 && (slash < 0 || colon < slash) {
		return checkAuthority(s, s[:colon], false)
	}
	return refuse("remote %s is a local path; local repositories need no credentials and run in the sandbox", quote(s))
}

func isScheme(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(isAlnum(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.') {
			return false
		}
	}
	return true
}

// checkAuthority checks "[user[:password]@]host[:port]" (port only in URLs).
func checkAuthority(url, auth string, withPort bool) *refusal {
	user, host := "", auth
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		user, host = auth[:k], auth[k+1:]
	}
	if withPort {
		if k := strings.IndexByte(host, ':'); k >= 0 {
			if !isDigits(host[k+1:]) && host[k+1:] != "" {
				return refuse("remote %s has an unusual port", quote(url))
			}
			host = host[:k]
		}
	}
	if host == "" || !isAlnum(host[0]) || (user != "" && user[0] == '-') {
		return refuse("remote %s has a host or user that is not a plain name (ssh would read \"-...\" as an option)", quote(url))
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !(isAlnum(c) || c == '.' || c == '-' || c == '_') {
			return refuse("remote %s has a host that is not a plain name", quote(url))
		}
	}
	for i := 0; i < len(user); i++ {
		if c := user[i]; !(isAlnum(c) || strings.IndexByte("._-~:!$&'()*+,;=", c) >= 0) {
			return refuse("remote %s has a user that is not plain", quote(url))
		}
	}
	return nil
}

// clonePositionals checks "<repository> [<directory>]". Without a directory
// the router adds the one git would derive, so that what it checked is what
// git uses.
func clonePositionals(w *walker, dir location, pos []string, seen map[string]bool, c *Cmd) *refusal {
	if len(pos) < 1 || len(pos) > 2 {
		return refuse("git clone takes a repository and at most a directory")
	}
	if r := checkURL(pos[0]); r != nil {
		return r
	}
	target := ""
	if len(pos) == 2 {
		target = pos[1]
	} else {
		target = cloneBasename(pos[0])
		if target == "" {
			return refuse("git clone of %s needs an explicit directory on the host", quote(pos[0]))
		}
		c.Args = append(c.Args, target)
	}
	t, r := w.resolve(dir, target, mayBeNew, "git clone directory")
	if r != nil {
		return r
	}
	c.CreatesDir = t.abs()
	return nil
}

// cloneBasename derives the directory git clone would create from a URL, or
// "" if it is not a plain name.
func cloneBasename(url string) string {
	s := strings.TrimRight(url, "/")
	s = strings.TrimSuffix(s, "/.git")
	s = strings.TrimRight(s, "/")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSuffix(s, ".git")
	if !isPlainWord(s) || strings.Contains(s, "+") || isGitName(s) {
		return ""
	}
	return s
}

// optName shows an option without its value.
func optName(a string) string {
	if name, _, ok := strings.Cut(a, "="); ok {
		return name
	}
	return a
}
