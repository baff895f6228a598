package session

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/hostenv"
)

// The host's git reads more than its config files: include.path and
// includeIf.*.path name further config files, and many values name programs
// git runs (core.sshCommand, credential helpers, filter and diff drivers,
// ...). When one of those lies inside a code dir, a sandbox write to it would
// run on the host at the user's next git command, or at a git command sbx
// routes to the host (hostrun runs git with the same effective config). The
// session finds them here and hands them to the sync with the hooks
// directories (sync.HostDir.Hooks): a sandbox change to any of them waits in
// quarantine. docs/security.md draws the line.

// maxConfigFiles bounds the config files followed through includes (git
// itself stops at a depth of 10; a wide fan-out is bounded here).
const maxConfigFiles = 64

// programKeys are the config variables (section.variable, lowercase, as git
// prints them) whose value is a program or a command line git runs, or a
// directory git copies hooks from. The variable of "section.*.variable"
// entries is matched under any subsection.
var programKeys = map[string]bool{
	"core.sshcommand": true, "core.editor": true, "core.pager": true, "core.fsmonitor": true,
	"core.askpass": true, "core.gitproxy": true, "credential.helper": true,
	"diff.external": true, "gpg.program": true, "sequence.editor": true,
	"sendemail.smtpserver": true, "sendemail.tocmd": true, "sendemail.cccmd": true,
	"sendemail.headercmd": true, "interactive.difffilter": true,
	"credential.*.helper": true, "filter.*.clean": true, "filter.*.smudge": true,
	"filter.*.process": true, "diff.*.textconv": true, "diff.*.command": true, "merge.*.driver": true,
	"gpg.*.program": true, "difftool.*.cmd": true, "difftool.*.path": true, "mergetool.*.cmd": true,
	"mergetool.*.path": true,
}

// isProgramKey reports whether git runs (or copies hooks from) what the
// value of key names. key is as git config --list prints it: section and
// variable lowercase, the subsection as written.
func isProgramKey(key, value string) bool {
	section, rest, ok := strings.Cut(key, ".")
	if !ok {
		return false
	}
	switch section {
	case "alias":
		// alias.<name> = !<shell command>; other aliases are git commands.
		return strings.HasPrefix(value, "!")
	case "pager":
		// pager.<command> = <pager program> (or a boolean).
		return true
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return programKeys[section+"."+rest]
	}
	return programKeys[section+".*."+rest[i+1:]]
}

// pathKeys are the config variables whose value is one path git runs
// programs from: hooks (core.hooksPath, also read by readHooks through git)
// and the template directory whose hooks git init and git clone copy into
// the new repository.
var pathKeys = map[string]bool{"core.hookspath": true, "init.templatedir": true}

// configPath resolves a path value: "~" expanded, relative to top.
func configPath(value, top string) string {
	switch {
	case value == "":
		return ""
	case strings.HasPrefix(value, "~"):
		return expandHome(value)
	case filepath.IsAbs(value):
		return filepath.Clean(value)
	case top != "":
		return filepath.Join(top, value)
	}
	return ""
}

// isIncludeKey: include.path and includeIf.<condition>.path.
func isIncludeKey(key string) bool {
	if key == "include.path" {
		return true
	}
	return strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path") && len(key) > len("includeif..path")
}

// configEntry is one line of git config --list -z --show-origin.
type configEntry struct {
	origin string // the file it came from (absolute), "" if not a file
	key    string
	value  string
}

// parseConfigList parses git config --list -z --show-origin: records of
// "ORIGIN\0KEY\nVALUE\0" (a key with no value has no "\n"). Relative
// "file:" origins are made absolute against dir.
func parseConfigList(out, dir string) []configEntry {
	var list []configEntry
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		origin, kv := fields[i], fields[i+1]
		key, value, _ := strings.Cut(kv, "\n")
		e := configEntry{key: key, value: value}
		if f, ok := strings.CutPrefix(origin, "file:"); ok && f != "" {
			if !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			e.origin = f
		}
		list = append(list, e)
	}
	return list
}

// includeTarget resolves an include path as git does: "~/" and "~user/"
// from the home directory, a relative path against the directory of the
// file that includes it (as spelled: git joins the strings). It returns ""
// when git could not resolve it either (a relative include from outside a
// file).
func includeTarget(value, origin string) string {
	if p := expandHome(value); p != "" {
		return filepath.Clean(p)
	}
	if filepath.IsAbs(value) {
		return filepath.Clean(value)
	}
	if origin == "" || value == "" {
		return ""
	}
	// Not cleaned: ".." after a symlinked directory goes up from the
	// link's target, as the kernel resolves it (realPath does).
	return filepath.Dir(origin) + string(filepath.Separator) + value
}

// expandHome expands "~" and "~/x" from $HOME and "~user/x" from the user
// database; "" when p does not start with "~" or the user is unknown.
func expandHome(p string) string {
	if !strings.HasPrefix(p, "~") {
		return ""
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	var home string
	if name == "" {
		home = os.Getenv("HOME")
	} else if u, err := user.Lookup(name); err == nil {
		home = u.HomeDir
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, rest)
}

// commandPaths returns the words of a command-line value that name a file
// (they hold a slash), as absolute paths: "~" expanded, relative ones
// against top (git runs these programs from the work tree's top). It
// over-approximates on purpose: the value is split at blanks, quotes and
// shell operators, and "--opt=PATH" yields PATH, so "sh -c './tools/ssh.sh
// -v'" names tools/ssh.sh. Protecting a file that is no program costs only a
// quarantine of the sandbox's change to it.
func commandPaths(value, top string) []string {
	value = strings.TrimPrefix(value, "!")
	words := strings.FieldsFunc(value, func(r rune) bool {
		return strings.ContainsRune(" \t\n\r\v\f\"'`;|&()<>=${}\\,", r)
	})
	var out []string
	for _, w := range words {
		if !strings.Contains(w, "/") {
			continue
		}
		w = strings.TrimPrefix(w, "file:")
		var p string
		switch {
		case strings.HasPrefix(w, "~"):
			p = expandHome(w)
		case filepath.IsAbs(w):
			p = filepath.Clean(w)
		case top != "":
			p = filepath.Join(top, w)
		}
		if p != "" && !contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// gitConfigPaths reads the host's effective git config in dir (a code dir,
// whose work tree's top is top) and returns the absolute paths git reads as
// config or runs, spelled as git would use them and with their symlinks
// resolved, and the config files it read or would read (for the
// fingerprint). Every include and includeIf target is followed whatever its
// condition (a condition can become true: onbranch, gitdir), up to
// maxConfigFiles files.
func gitConfigPaths(run func(args ...string) (string, string, error), dir, top string) (paths, files []string, err error) {
	out, stderr, err := run(configListArgs...)
	if err != nil {
		return nil, nil, fmt.Errorf("git config --list: %v: %s", err, stderr)
	}
	entries := parseConfigList(out, dir)
	add := func(p string) {
		if c := filepath.Clean(p); !contains(paths, c) {
			paths = append(paths, c)
		}
		if real := realPath(p); real != "" && !contains(paths, real) {
			paths = append(paths, real)
		}
	}
	// The config files themselves, when a code dir holds them (a code dir
	// that is the home directory holds ~/.gitconfig), existing or not yet:
	// the system and global files git would read, and every file an entry
	// came from (the repository's own config is under .git, which never
	// comes back).
	seen := map[string]bool{}
	base := append([]string{"/etc/gitconfig"}, hostenv.GlobalConfigPaths()...)
	if p := os.Getenv("GIT_CONFIG_SYSTEM"); p != "" {
		base = append(base, p)
	}
	for _, e := range entries {
		if e.origin != "" {
			base = append(base, e.origin)
		}
	}
	for _, f := range base {
		if !seen[f] {
			seen[f] = true
			add(f)
		}
	}
	var errs []string
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		switch {
		case isIncludeKey(e.key):
			spelled := includeTarget(e.value, e.origin)
			if spelled == "" {
				continue
			}
			// Read once whatever its spellings (by the file git opens), but
			// through its spelling: git resolves the includes inside it
			// relative to that.
			t := filepath.Clean(spelled)
			if real := realPath(spelled); real != "" {
				t = real
			}
			if seen[t] {
				continue
			}
			add(spelled)
			seen[t] = true
			files = append(files, filepath.Clean(spelled))
			if len(files) > maxConfigFiles {
				errs = append(errs, fmt.Sprintf("more than %d included config files; %s and later ones not followed", maxConfigFiles, t))
				continue
			}
			if fi, err := os.Stat(spelled); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			out, stderr, err := run("config", "--file", spelled, "--list", "--show-origin", "-z", "--no-includes")
			if err != nil {
				errs = append(errs, fmt.Sprintf("git config --file %s: %v: %s", t, err, stderr))
				continue
			}
			entries = append(entries, parseConfigList(out, dir)...)
		case pathKeys[e.key]:
			if p := configPath(e.value, top); p != "" {
				add(p)
			}
		case isProgramKey(e.key, e.value):
			for _, p := range commandPaths(e.value, top) {
				add(p)
			}
		}
	}
	if len(errs) > 0 {
		err = fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return paths, files, err
}

// realPath is p with its symlinks resolved as the kernel would open it,
// also where it does not exist (yet): a dangling link resolves to where it
// points, a missing component stays as spelled. "" when nothing changes or
// the links loop.
func realPath(p string) string {
	if !filepath.IsAbs(p) {
		return ""
	}
	todo := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur, links := "/", 0
	for len(todo) > 0 {
		el := todo[0]
		todo = todo[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, el)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 255 {
			return ""
		}
		target, err := os.Readlink(next)
		if err != nil {
			return ""
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if cur == filepath.Clean(p) {
		return ""
	}
	return cur
}

// protectable: what the sync's protected set takes as a rooted path (no
// glob characters, no backslash); anything else is reported, not passed,
// so that one odd name does not cost the whole set.
func protectable(rel string) bool { return !strings.ContainsAny(rel, `*?[\`) }
