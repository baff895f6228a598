package hostenv

import (
	"fmt"
	"strings"
)

// Render writes kvs as a git config file that "git config --list" reads back
// as exactly kvs: same keys, values and order, repeated keys kept. Adjacent
// keys of one section share a header; a section that comes back later gets
// a new header, which git allows. Every value is quoted; a NoValue key is
// written as its name alone.
//
// Render refuses (and names) a key that is not in git's canonical form (see
// KV) or a value with a NUL byte, which no git config file can hold.
func Render(kvs []KV) (string, error) {
	var b strings.Builder
	b.WriteString("# Written by sbx from an allowlist of the host's git config.\n")
	header := ""
	for i, kv := range kvs {
		section, sub, name, err := splitKey(kv.Key)
		if err != nil {
			return "", fmt.Errorf("render git config: entry %d: %w", i+1, err)
		}
		if strings.IndexByte(kv.Value, 0) >= 0 {
			return "", fmt.Errorf("render git config: entry %d (%s): value has a NUL byte", i+1, redactKey(kv.Key))
		}
		h := "[" + section + "]\n"
		if hasSubsection(kv.Key) {
			h = "[" + section + " \"" + escape(sub, false) + "\"]\n"
		}
		if h != header {
			b.WriteString(h)
			header = h
		}
		b.WriteString("\t" + name)
		if !kv.NoValue {
			b.WriteString(" = \"" + escape(kv.Value, true) + "\"")
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// escape quotes s for a double-quoted subsection or value. Git's subsection
// syntax only knows \\ and \"; values also take \n, \t and \b.
func escape(s string, value bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case value && c == '\n':
			b.WriteString(`\n`)
		case value && c == '\t':
			b.WriteString(`\t`)
		case value && c == '\b':
			b.WriteString(`\b`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
