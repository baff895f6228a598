package hostenv

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ErrInvalidPattern is wrapped by the errors Forward returns for a pattern it
// cannot use.
var ErrInvalidPattern = errors.New("invalid environment name pattern")

// reservedNames are never forwarded: the sandbox sets them itself, or they
// point at host paths and sockets that mean nothing in the sandbox, or they
// make a shell, the dynamic loader or git run something else.
var reservedNames = map[string]bool{
	"PATH": true, "HOME": true, "SHELL": true, "USER": true, "LOGNAME": true,
	"PWD": true, "OLDPWD": true, "TERM": true, "TMPDIR": true, "HOSTNAME": true,
	"SHLVL": true, "_": true, "IFS": true, "CDPATH": true, "GLOBIGNORE": true,
	"PS4": true, "PROMPT_COMMAND": true, "BASH_ENV": true, "ENV": true,
	// A host socket path: forwarding it would look like forwarding the ssh
	// agent while giving the sandbox nothing.
	"SSH_AUTH_SOCK": true, "SSH_AGENT_PID": true,
}

// reservedPrefixes are name prefixes that are never forwarded. GIT_* is
// refused as a whole (GIT_DIR, GIT_WORK_TREE, GIT_CONFIG*, GIT_EXEC_PATH,
// GIT_SSH*, GIT_ASKPASS, GIT_INDEX_FILE, GIT_TRACE*, ...) except the commit
// identity in gitIdentity.
var reservedPrefixes = []string{"LD_", "DYLD_", "GIT_", "SBX_", "AGENT_SANDBOX_", "XDG_", "BASH_FUNC_"}

var gitIdentity = map[string]bool{
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true,
}

// Reserved reports whether name is never forwarded into a sandbox. LANG,
// LC_* and TZ are not reserved: they only select a locale or time zone, and
// a name the sandbox lacks falls back to the default.
func Reserved(name string) bool {
	if reservedNames[name] {
		return true
	}
	if gitIdentity[name] {
		return false
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Forward returns the NAME=VALUE entries of hostEnv (as from os.Environ)
// whose name matches a pattern of forward and no pattern of skip. Patterns
// are exact names or doublestar globs ("NPM_*", "AWS_{REGION,PROFILE}"),
// matched case-sensitively against the name only. A nil or empty forward
// list forwards nothing.
//
// Names that match forward and not skip but are Reserved are returned in
// refused (names only) for the caller to warn about. Entries that are not
// NAME=VALUE with a portable name ([A-Za-z_][A-Za-z0-9_]*), or whose value
// holds a NUL byte, are dropped silently. If a name appears twice, the last
// value wins, as with os/exec. An invalid pattern in either list is an error
// wrapping ErrInvalidPattern, and nothing is forwarded.
func Forward(hostEnv []string, forward, skip []string) (env []string, refused []string, err error) {
	if err := validatePatterns("forward", forward); err != nil {
		return nil, nil, err
	}
	if err := validatePatterns("skip", skip); err != nil {
		return nil, nil, err
	}
	index := map[string]int{} // name -> position in env
	seenRefused := map[string]bool{}
	for _, kv := range hostEnv {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !validName(name) || strings.IndexByte(value, 0) >= 0 {
			continue
		}
		if !matchAny(forward, name) || matchAny(skip, name) {
			continue
		}
		if Reserved(name) {
			if !seenRefused[name] {
				seenRefused[name] = true
				refused = append(refused, name)
			}
			continue
		}
		if i, dup := index[name]; dup {
			env[i] = kv
			continue
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	return env, refused, nil
}

// ParseList splits the value of AGENT_SANDBOX_FORWARD_ENV or
// AGENT_SANDBOX_ENV_SKIP into patterns: separated by commas and/or
// whitespace, empty items ignored. A comma always separates, so brace
// alternatives ("AWS_{A,B}") cannot be written there; Forward refuses the
// halves as malformed.
func ParseList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
	})
}

func validatePatterns(list string, patterns []string) error {
	for _, p := range patterns {
		if err := validatePattern(p); err != nil {
			return fmt.Errorf("%s pattern %q: %w: %s", list, p, ErrInvalidPattern, err)
		}
	}
	return nil
}

func validatePattern(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !isNameByte(c) && !strings.ContainsRune("*?[]{},!^-", rune(c)) {
			return fmt.Errorf("character %q cannot appear in an environment name or a glob over one", c)
		}
	}
	if !doublestar.ValidatePattern(p) {
		return errors.New("malformed glob (unbalanced [ ] or { })")
	}
	return nil
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if doublestar.MatchUnvalidated(p, name) {
			return true
		}
	}
	return false
}

func validName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
}
