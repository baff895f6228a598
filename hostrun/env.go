package hostrun

import (
	"os"
	"path/filepath"
	"strings"
)

// keptGitVars are the GIT_* variables of the host environment that reach host
// commands. Every other GIT_* variable is removed, because git reads them to
// pick the repository, the config, the programs it runs or the protocols it
// allows (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY,
// GIT_ALTERNATE_OBJECT_DIRECTORIES, GIT_COMMON_DIR, GIT_NAMESPACE,
// GIT_CEILING_DIRECTORIES, GIT_DISCOVERY_ACROSS_FILESYSTEM, GIT_CONFIG,
// GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n,
// GIT_CONFIG_VALUE_n, GIT_EXEC_PATH, GIT_TEMPLATE_DIR, GIT_ALLOW_PROTOCOL,
// GIT_EXTERNAL_DIFF, GIT_REDIRECT_STDIN/STDOUT/STDERR, GIT_SHALLOW_FILE,
// GIT_GRAFT_FILE, GIT_REPLACE_REF_BASE, GIT_QUARANTINE_PATH, GIT_PREFIX,
// GIT_TRACE_REDACT, and whatever a future git adds). docs/security.md
// gives the reason for each.
//
// Kept: the user's credential and network setup (ssh command, askpass, proxy
// command, TLS settings), the user's own config files (GIT_CONFIG_GLOBAL and
// GIT_CONFIG_SYSTEM select them; repositories cannot set them), identity, and
// trace switches that print to places the user chose.
var keptGitVars = map[string]bool{
	"GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_SSH_VARIANT": true, "GIT_ASKPASS": true,
	"GIT_PROXY_COMMAND": true, "GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true,
	"GIT_CONFIG_NOSYSTEM": true, "GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true, "GIT_HTTP_USER_AGENT": true,
	"GIT_HTTP_LOW_SPEED_LIMIT": true, "GIT_HTTP_LOW_SPEED_TIME": true,
	"GIT_HTTP_MAX_REQUESTS": true, "GIT_HTTP_PROXY_AUTHMETHOD": true, "GIT_SSL_CAINFO": true,
	"GIT_SSL_CAPATH": true, "GIT_SSL_CERT": true, "GIT_SSL_KEY": true,
	"GIT_SSL_CERT_PASSWORD_PROTECTED": true, "GIT_SSL_CIPHER_LIST": true, "GIT_SSL_VERSION": true,
	"GIT_SSL_NO_VERIFY": true, "GIT_CURL_VERBOSE": true, "GIT_PROTOCOL_FROM_USER": true,
	"GIT_ATTR_NOSYSTEM": true, "GIT_TRACE": true, "GIT_TRACE_PACKET": true,
	"GIT_TRACE_PERFORMANCE": true, "GIT_TRACE_SETUP": true, "GIT_TRACE_CURL": true,
	"GIT_TRACE_CURL_NO_DATA": true, "GIT_TRACE_SHALLOW": true, "GIT_TRACE_PACK_ACCESS": true,
	"GIT_TRACE2": true, "GIT_TRACE2_EVENT": true, "GIT_TRACE2_PERF": true, "GIT_FLUSH": true,
	"GIT_OPTIONAL_LOCKS": true, "GIT_ADVICE": true,
}

// removedVars are other variables removed: the filters' option parsing
// (options after operands, as the router checked them) must not change.
var removedVars = map[string]bool{"POSIXLY_CORRECT": true, "GREP_OPTIONS": true}

// fixedVars are set for every host command. Nothing may wait on a prompt or
// an editor: the agent cannot answer and stdin is /dev/null.
var fixedVars = []string{
	"GIT_TERMINAL_PROMPT=0",
	"GIT_EDITOR=:",
	"GIT_SEQUENCE_EDITOR=:",
	"GIT_MERGE_AUTOEDIT=no",
	"GIT_PAGER=cat",
}

// Environ returns the environment host commands get, from the host's
// environment: GIT_* variables outside keptGitVars (and GIT_LFS_*) removed,
// POSIXLY_CORRECT and GREP_OPTIONS removed, PATH without relative entries and
// without entries inside a code dir (so no program the sandbox wrote is ever
// found), and fixedVars appended.
func Environ(host []string, codeDirs []string) []string {
	var out []string
	for _, kv := range host {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case name == "PATH":
			out = append(out, "PATH="+safePath(value, codeDirs))
		case strings.HasPrefix(name, "GIT_"):
			if keptGitVars[name] || strings.HasPrefix(name, "GIT_LFS_") {
				out = append(out, kv)
			}
		case removedVars[name]:
		default:
			out = append(out, kv)
		}
	}
	return append(out, fixedVars...)
}

// safePath keeps the absolute PATH entries that are not inside a code dir,
// comparing both as written and with symlinks resolved.
func safePath(path string, codeDirs []string) string {
	var roots []string
	for _, d := range codeDirs {
		if !filepath.IsAbs(d) {
			continue
		}
		roots = append(roots, filepath.Clean(d))
		if real, err := filepath.EvalSymlinks(d); err == nil {
			roots = append(roots, real)
		}
	}
	isInside := func(p string) bool {
		for _, r := range roots {
			if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) || r == string(filepath.Separator) {
				return true
			}
		}
		return false
	}
	var keep []string
	for _, e := range filepath.SplitList(path) {
		if e == "" || !filepath.IsAbs(e) {
			continue
		}
		e = filepath.Clean(e)
		if isInside(e) {
			continue
		}
		if real, err := filepath.EvalSymlinks(e); err == nil && isInside(real) {
			continue
		}
		keep = append(keep, e)
	}
	return strings.Join(keep, string(os.PathListSeparator))
}
