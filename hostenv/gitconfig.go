package hostenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrGitNotFound is returned by ReadConfig when the host has no git binary.
var ErrGitNotFound = errors.New("git not found on PATH (install git)")

// maxConfigOutput caps what ReadConfig accepts from git. A real config file
// is a few kilobytes; more is refused rather than copied.
const maxConfigOutput = 4 << 20

// KV is one entry of a git config file, as "git config --list" prints it.
type KV struct {
	// Key is in git's canonical form: section.name or
	// section.subsection.name, with section and name lower-cased and the
	// subsection as written (it may contain dots).
	Key string
	// Value is the value with git's quoting and escapes removed.
	Value string
	// NoValue is true for a key written without "=" (git reads it as
	// boolean true); Value is then "". It differs from `key = ""`.
	NoValue bool
}

// ReadConfig returns the entries of the git config file at path, in file
// order, by running the host's "git config --file path --no-includes
// --list -z". Includes are not followed, no other config file is read, and
// git runs in / with stdin at /dev/null and an environment of PATH, LC_ALL=C,
// GIT_CONFIG_NOSYSTEM=1 and GIT_CONFIG_GLOBAL=/dev/null only.
//
// A missing file gives (nil, nil). If git rejects the file or its output
// cannot be parsed, the error says so and callers should give the sandbox an
// empty config.
func ReadConfig(ctx context.Context, path string) ([]KV, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("read git config %q: %w", path, ErrGitNotFound)
	}
	cmd := exec.CommandContext(ctx, git, "config", "--file", path, "--no-includes", "--list", "-z")
	cmd.Dir = "/"
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
	}
	cmd.Stdin = nil // os/exec connects a nil Stdin to /dev/null
	stdout := &capWriter{max: maxConfigOutput}
	stderr := &capWriter{max: 1024, truncate: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read git config %q: %w", path, ctx.Err())
		}
		if stdout.over {
			return nil, fmt.Errorf("read git config %q: refused: git printed more than %d bytes", path, maxConfigOutput)
		}
		return nil, fmt.Errorf("read git config %q: git: %w: %q", path, err, strings.TrimSpace(stderr.buf.String()))
	}
	kvs, err := parseList(stdout.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("read git config %q: %w", path, err)
	}
	return kvs, nil
}

// parseList parses "git config --list -z" output: records ending in NUL,
// each "key\nvalue" or "key" for a key with no value.
func parseList(out []byte) ([]KV, error) {
	var kvs []KV
	for len(out) > 0 {
		rec, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("parse git config output: trailing data without NUL after %d entries", len(kvs))
		}
		out = rest
		key, value, hasValue := strings.Cut(string(rec), "\n")
		if _, _, _, err := splitKey(key); err != nil {
			return nil, fmt.Errorf("parse git config output: entry %d: %w", len(kvs)+1, err)
		}
		kvs = append(kvs, KV{Key: key, Value: value, NoValue: !hasValue})
	}
	return kvs, nil
}

// splitKey splits a canonical key at its first dot (after the section) and
// its last dot (before the name); what lies between is the subsection,
// which may contain dots. hasSub distinguishes "a..b" (empty subsection)
// from "a.b" (none). It refuses keys git would not print.
func splitKey(key string) (section, sub, name string, err error) {
	first := strings.IndexByte(key, '.')
	last := strings.LastIndexByte(key, '.')
	if first < 0 {
		return "", "", "", fmt.Errorf("key %q has no section", key)
	}
	section, name = key[:first], key[last+1:]
	if first != last {
		sub = key[first+1 : last]
	}
	if section == "" {
		return "", "", "", fmt.Errorf("key %q has an empty section", key)
	}
	for i := 0; i < len(section); i++ {
		c := section[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "", "", "", fmt.Errorf("key %q: section has %q (canonical sections are [a-z0-9-])", key, c)
		}
	}
	if name == "" || !(name[0] >= 'a' && name[0] <= 'z') {
		return "", "", "", fmt.Errorf("key %q: name must start with a-z", key)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "", "", "", fmt.Errorf("key %q: name has %q (canonical names are [a-z0-9-])", key, c)
		}
	}
	if strings.ContainsAny(sub, "\n\x00") {
		return "", "", "", fmt.Errorf("key %q: subsection has a newline or NUL", key)
	}
	return section, sub, name, nil
}

// hasSubsection reports whether a key (already checked by splitKey) has a
// subsection, possibly empty.
func hasSubsection(key string) bool {
	return strings.IndexByte(key, '.') != strings.LastIndexByte(key, '.')
}

// GlobalConfigPaths returns the user's global git config files in the order
// git reads them, later files overriding earlier ones: if GIT_CONFIG_GLOBAL
// is set, that file alone (none if it is empty); otherwise
// $XDG_CONFIG_HOME/git/config (or ~/.config/git/config) then ~/.gitconfig.
// The system config (/etc/gitconfig) is never read: it is the machine's, not
// the user's. Files that do not exist are included; ReadConfig skips them.
func GlobalConfigPaths() []string {
	if p, ok := os.LookupEnv("GIT_CONFIG_GLOBAL"); ok {
		if p == "" {
			return nil
		}
		return []string{p}
	}
	home, _ := os.UserHomeDir()
	var paths []string
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
		paths = append(paths, filepath.Join(xdg, "git", "config"))
	} else if home != "" {
		paths = append(paths, filepath.Join(home, ".config", "git", "config"))
	}
	if home != "" {
		paths = append(paths, filepath.Join(home, ".gitconfig"))
	}
	return paths
}

// ReadGlobalConfig reads every file of GlobalConfigPaths and returns their
// entries concatenated in git's order, so a rendered copy gives the same
// effective values. It stops at the first error.
func ReadGlobalConfig(ctx context.Context) ([]KV, error) {
	var all []KV
	for _, p := range GlobalConfigPaths() {
		kvs, err := ReadConfig(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, kvs...)
	}
	return all, nil
}

// capWriter keeps at most max bytes. Past that it fails the write, which
// makes os/exec stop copying and the command fail, or with truncate set it
// drops the rest quietly (for stderr, kept only to quote in errors).
type capWriter struct {
	buf      bytes.Buffer
	max      int
	truncate bool
	over     bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		w.over = true
		w.buf.Write(p[:w.max-w.buf.Len()])
		if w.truncate {
			return len(p), nil
		}
		return 0, errors.New("output limit reached")
	}
	return w.buf.Write(p)
}
