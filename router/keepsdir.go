package router

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// dirBuiltins are the bash builtins that change the shell's own working
// directory, or run code the parse cannot see (eval, source, a trap, a
// callback, an alias, a builtin looked up by another name) that may: a
// command naming one keeps its cwd report.
var dirBuiltins = map[string]bool{
	"cd": true, "pushd": true, "popd": true,
	"source": true, ".": true, "eval": true, "exec": true, "trap": true,
	"builtin": true, "command": true, "enable": true,
	"alias": true, "shopt": true,
	"mapfile": true, "readarray": true, "fc": true, "complete": true, "compgen": true,
}

// keepsDir reports whether running f in bash cannot change the shell's own
// working directory, so that no report of where it ended is needed: every
// simple command anywhere in it (subshells, substitutions and function
// bodies included, which only errs on the safe side) is named by a plain
// word, quotes allowed but no expansion, backslash, glob or brace, and
// none is in dirBuiltins. A child process cannot change the shell's
// directory; only the shell's own builtins and code it reads at run time
// can. The caller also refuses an environment that hands bash code
// (BASH_ENV, exported functions): see session.
func keepsDir(f *syntax.File) bool {
	keeps := true
	syntax.Walk(f, func(n syntax.Node) bool {
		if !keeps {
			return false
		}
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			name, ok := plainWord(c.Args[0])
			if !ok || dirBuiltins[name] {
				keeps = false
				return false
			}
		}
		return true
	})
	return keeps
}

// plainWord is w after quote removal when w has no expansion of any kind:
// unquoted parts without a backslash, glob, brace or tilde, single-quoted
// parts, and double-quoted parts of plain text.
func plainWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			// A lone [ (test) matches no file: no bracket expression.
			if p.Value == "" || p.Value != "[" && strings.ContainsAny(p.Value, "\\{}*?[]~!") {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok || strings.Contains(l.Value, "\\") {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), b.Len() > 0
}
