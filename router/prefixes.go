package router

import (
	"fmt"
	"strings"
)

// DefaultHostCommands is the host-command list used when the user configures
// none. Configuring a list replaces it.
var DefaultHostCommands = []string{
	"git push", "git fetch", "git pull", "git clone", "git ls-remote",
	"git remote add", "git remote set-url",
}

// gitSubcommands are the git sub-commands the router has an option allowlist
// for; a listed git prefix must start with one of them.
var gitSubcommands = []string{"push", "fetch", "pull", "clone", "ls-remote", "remote add", "remote set-url"}

// notListable are first words a host-command entry may not have: shell
// keywords and builtins (the host runs no shell, so the name would mean a
// different program there), the router's own glue, and programs whose job is
// to run other programs.
var notListable = map[string]bool{
	"cd": true, "echo": true, "printf": true, "grep": true, "jq": true, "head": true,
	"tail": true, "sort": true, "uniq": true, "cut": true, "tr": true, "wc": true,
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "case": true,
	"esac": true, "for": true, "select": true, "while": true, "until": true, "do": true,
	"done": true, "in": true, "function": true, "time": true, "coproc": true,
	"alias": true, "bg": true, "bind": true, "break": true, "builtin": true,
	"caller": true, "command": true, "compgen": true, "complete": true, "compopt": true,
	"continue": true, "declare": true, "dirs": true, "disown": true, "enable": true,
	"eval": true, "exec": true, "exit": true, "export": true, "false": true, "fc": true,
	"fg": true, "getopts": true, "hash": true, "help": true, "history": true, "jobs": true,
	"kill": true, "let": true, "local": true, "logout": true, "mapfile": true, "popd": true,
	"pushd": true, "pwd": true, "read": true, "readarray": true, "readonly": true,
	"return": true, "set": true, "shift": true, "shopt": true, "source": true,
	"suspend": true, "test": true, "times": true, "trap": true, "true": true, "type": true,
	"typeset": true, "ulimit": true, "umask": true, "unalias": true, "unset": true,
	"wait": true,
	"env":  true, "sudo": true, "doas": true, "xargs": true, "nohup": true, "timeout": true,
	"nice": true, "setsid": true, "stdbuf": true, "chroot": true, "unshare": true,
	"nsenter": true, "watch": true, "strace": true, "sh": true, "bash": true, "dash": true,
	"zsh": true, "ksh": true, "fish": true, "csh": true, "tcsh": true, "busybox": true,
}

// ParsePrefixes turns host-command entries such as "git push" into word lists.
// An entry is an exact sub-command: "gh pr create" does not make gh a host
// command. Words are plain names (letters, digits, '.', '_', '+', '-'); a git
// entry must start with a sub-command the router has an option allowlist for.
// Duplicates are dropped.
func ParsePrefixes(entries []string) ([][]string, error) {
	var out [][]string
	seen := map[string]bool{}
	for i, e := range entries {
		words := strings.Fields(e)
		if err := checkPrefix(words); err != nil {
			if len(words) == 0 {
				return nil, fmt.Errorf("router: host command %d is empty", i+1)
			}
			return nil, fmt.Errorf("router: host command %q: %w", e, err)
		}
		key := strings.Join(words, " ")
		if !seen[key] {
			seen[key] = true
			out = append(out, words)
		}
	}
	return out, nil
}

func checkPrefix(words []string) error {
	if len(words) == 0 {
		return fmt.Errorf("empty")
	}
	for _, w := range words {
		if !isPlainWord(w) {
			return fmt.Errorf("word %q is not a plain name (letters, digits, '.', '_', '+', '-', not starting with '-' or '.')", w)
		}
	}
	if notListable[words[0]] {
		return fmt.Errorf("%q is a shell builtin, router glue or a program runner and cannot be a host command", words[0])
	}
	if words[0] == "git" {
		if gitSubcommand(words[1:]) == "" {
			return fmt.Errorf("git entries must start with one of %s", strings.Join(gitSubcommands, ", "))
		}
	}
	return nil
}

// validPrefixes keeps the well-formed prefixes Decide was given.
func validPrefixes(in [][]string) [][]string {
	var out [][]string
	for _, p := range in {
		if checkPrefix(p) == nil {
			out = append(out, p)
		}
	}
	return out
}

// gitSubcommand returns the allowlisted sub-command that words (what follows
// "git" and its global options) start with, or "".
func gitSubcommand(words []string) string {
	for _, s := range gitSubcommands {
		sw := strings.Fields(s)
		if hasPrefix(words, sw) {
			return s
		}
	}
	return ""
}

func hasPrefix(words, prefix []string) bool {
	if len(words) < len(prefix) {
		return false
	}
	for i := range prefix {
		if words[i] != prefix[i] {
			return false
		}
	}
	return true
}

func isPlainWord(w string) bool {
	if w == "" || w[0] == '-' || w[0] == '.' {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(isAlnum(c) || c == '.' || c == '_' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
