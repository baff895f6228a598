package router

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// unquote performs quote removal on a word made only of literals and quotes,
// refusing every character the shell would expand rather than pass on: "$" and
// backquotes outside single quotes, and unquoted glob, brace and tilde
// characters. What it returns is exactly the argument bash would pass.
func unquote(word *syntax.Word) (string, *refusal) {
	if word == nil {
		return "", refuse("missing word")
	}
	var b strings.Builder
	for _, part := range word.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if r := unquoteLit(&b, p.Value, false); r != nil {
				return "", r
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", refuse("ANSI-C quoting $'...' is never run on the host")
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", refuse("locale quoting $\"...\" is never run on the host")
			}
			for _, inner := range p.Parts {
				lit, ok := inner.(*syntax.Lit)
				if !ok {
					return "", refuse("expansions inside double quotes are never done on the host")
				}
				if r := unquoteLit(&b, lit.Value, true); r != nil {
					return "", r
				}
			}
		default:
			return "", refuse("expansions are never done on the host")
		}
	}
	return b.String(), nil
}

// unquoteLit appends the value of a literal as found in the source: unquoted,
// or inside double quotes (inDq), where a backslash only escapes $ ` " \.
func unquoteLit(b *strings.Builder, v string, inDq bool) *refusal {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			if i+1 >= len(v) {
				return refuse("a trailing backslash is never run on the host")
			}
			n := v[i+1]
			i++
			if inDq && !strings.ContainsRune("$`\"\\", rune(n)) {
				b.WriteByte('\\')
			}
			b.WriteByte(n)
		case c == '$':
			return refuse("\"$\" outside single quotes is never expanded on the host")
		case c == '`':
			return refuse("command substitution `...` is never run on the host")
		case inDq:
			b.WriteByte(c)
		case c == '*' || c == '?' || c == '[':
			return refuse("unquoted globs are never expanded on the host")
		case c == '{' || c == '}':
			return refuse("unquoted braces (brace expansion) are never run on the host")
		case c == '~':
			return refuse("unquoted ~ (tilde expansion) is never done on the host")
		default:
			b.WriteByte(c)
		}
	}
	return nil
}
