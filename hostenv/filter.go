package hostenv

import "strings"

// globalKeys are the only keys copied from the user's global config: identity
// and the settings that change what git writes. Nothing that names a program,
// a credential, a URL rewrite or another file.
var globalKeys = map[string]bool{
	"user.name": true, "user.email": true,
	"init.defaultbranch": true, "pull.rebase": true, "push.default": true,
	"core.autocrlf": true, "core.eol": true, "core.filemode": true, "core.safecrlf": true,
}

// repoKeys are the keys, besides globalKeys, copied from a repository's own
// config: its format, and remotes and branches so the agent sees the same
// upstreams. remote.<name>.* and branch.<name>.* are in remoteNames and
// branchNames.
var repoKeys = map[string]bool{
	"core.repositoryformatversion": true, "core.bare": true, "core.logallrefupdates": true,
}

var (
	remoteNames = map[string]bool{"url": true, "fetch": true, "pushurl": true}
	branchNames = map[string]bool{"remote": true, "merge": true, "rebase": true}
)

// FilterGlobal keeps the entries of a user's global config whose key is one
// of user.name, user.email, init.defaultbranch, pull.rebase, push.default,
// core.autocrlf, core.eol, core.filemode and core.safecrlf, in order. Every
// other key (aliases, credential helpers, url.*.insteadOf, core.sshCommand,
// include paths, ...) is dropped, as is a kept key whose value
// HasCredentials. dropped lists each dropped key once, with any subsection
// that itself holds credentials replaced by "<redacted>"; values are never
// reported.
func FilterGlobal(kvs []KV) (kept []KV, dropped []string) {
	return filter(kvs, allowedGlobal)
}

// FilterRepo is FilterGlobal for a repository's .git/config. It also keeps
// core.repositoryformatversion, core.bare, core.logallrefupdates,
// extensions.<name>, remote.<name>.url, remote.<name>.pushurl,
// remote.<name>.fetch, branch.<name>.remote, branch.<name>.merge and
// branch.<name>.rebase (<name> non-empty). Hooks, fsmonitor, worktree,
// aliases, filters, diff and merge drivers, credential, http and gpg
// settings, and anything else are dropped.
func FilterRepo(kvs []KV) (kept []KV, dropped []string) {
	return filter(kvs, allowedRepo)
}

func allowedGlobal(key string) bool { return globalKeys[key] }

func allowedRepo(key string) bool {
	if globalKeys[key] || repoKeys[key] {
		return true
	}
	section, sub, name, err := splitKey(key)
	if err != nil {
		return false
	}
	switch section {
	case "extensions":
		return !hasSubsection(key)
	case "remote":
		return sub != "" && remoteNames[name]
	case "branch":
		return sub != "" && branchNames[name]
	}
	return false
}

func filter(kvs []KV, allowed func(string) bool) (kept []KV, dropped []string) {
	seen := map[string]bool{}
	for _, kv := range kvs {
		if _, _, _, err := splitKey(kv.Key); err == nil && allowed(kv.Key) &&
			!HasCredentials(kv.Value) && strings.IndexByte(kv.Value, 0) < 0 {
			kept = append(kept, kv)
			continue
		}
		k := redactKey(kv.Key)
		if !seen[k] {
			seen[k] = true
			dropped = append(dropped, k)
		}
	}
	return kept, dropped
}

// redactKey makes a dropped key safe to log: keys like
// url."https://user:token@host/".insteadof carry the secret in the
// subsection.
func redactKey(key string) string {
	first := strings.IndexByte(key, '.')
	last := strings.LastIndexByte(key, '.')
	if first >= 0 && first != last {
		if sub := key[first+1 : last]; HasCredentials(sub) || strings.ContainsAny(sub, "?\n\x00") {
			key = key[:first] + ".<redacted>." + key[last+1:]
		}
	}
	if HasCredentials(key) || strings.ContainsAny(key, "?\n\x00") {
		return "<redacted>"
	}
	return key
}

// HasCredentials reports whether s holds what looks like credentials in a
// URL: a colon followed later by an "@" (user:password@ in a URL, or
// user:password@host:path in scp-like syntax; a colon that starts "://" does
// not count), or any user@ in an http, https, ftp or ftps URL, since access
// tokens are often passed as the user name. It errs on the side of true:
// "https://host:443/a@b" counts.
func HasCredentials(s string) bool {
	lastAt := strings.LastIndexByte(s, '@')
	if lastAt < 0 {
		return false
	}
	for i := 0; i < lastAt; i++ {
		if s[i] != ':' {
			continue
		}
		if !strings.HasPrefix(s[i:], "://") {
			return true // a colon before an "@": user:password@
		}
		j := i
		for j > 0 && isSchemeByte(s[j-1]) {
			j--
		}
		switch strings.ToLower(s[j:i]) {
		case "http", "https", "ftp", "ftps":
			authority := s[i+3:]
			if end := strings.IndexAny(authority, "/?#"); end >= 0 {
				authority = authority[:end]
			}
			if strings.Contains(authority, "@") {
				return true
			}
		}
		i += 2 // this colon starts "://", not a password
	}
	return false
}

func isSchemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}
