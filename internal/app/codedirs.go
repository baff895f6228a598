package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ResolveCodeDirs makes each code dir absolute and real, and refuses the ones
// that would put the user's home or sbx's own state into the sandbox.
func ResolveCodeDirs(dirs []string, stateRoot string) ([]string, error) {
	home, _ := os.UserHomeDir()
	if home != "" {
		if r, err := filepath.EvalSymlinks(home); err == nil {
			home = r
		}
	}
	var out []string
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("code dir %s: %w", d, errors.Unwrap(err))
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("code dir %s: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("code dir %s is not a directory", d)
		}
		switch {
		case real == "/":
			return nil, errors.New("the code dir is /: sbx would copy the whole machine into the sandbox; pass --code-dir with your project's directory")
		case home != "" && Within(home, real):
			return nil, fmt.Errorf("code dir %s holds your home directory %s (and its keys and tokens): pass --code-dir with your project's directory", real, home)
		case Within(stateRoot, real) || Within(real, stateRoot):
			return nil, fmt.Errorf("code dir %s overlaps sbx's state directory %s", real, stateRoot)
		}
		for _, o := range out {
			if Within(o, real) || Within(real, o) {
				return nil, fmt.Errorf("code dirs %s and %s overlap", o, real)
			}
		}
		out = append(out, real)
	}
	return out, nil
}

// Within reports whether p is dir or below it.
func Within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// GitTop finds the working tree's top level by looking for .git upwards. It
// runs no git: a repository's config could make git run programs.
func GitTop(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// ChooseCodeDirs picks the code dirs of a command run from cwd: the ones
// given (flags), else the configured ones, else the git top level of cwd,
// else cwd itself.
func ChooseCodeDirs(given, configured []string, cwd string) []string {
	switch {
	case len(given) > 0:
		return given
	case len(configured) > 0:
		return configured
	}
	if top := GitTop(cwd); top != "" {
		return []string{top}
	}
	return []string{cwd}
}
