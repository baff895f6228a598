// Package escape shows text the sandbox chose (file names, link targets) on
// the user's terminal and in tool results without letting it act there: a
// name carrying ESC sequences could clear the screen, rewrite earlier lines
// or write the clipboard (OSC 52) when printed raw.
//
// What it promises: the result of Name and Line holds no control character
// (C0, DEL, C1), no format character (bidirectional overrides, zero-width
// joiners) and no invalid UTF-8; ordinary printable UTF-8 is kept as it is.
package escape

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name returns s unchanged when every rune of it is printable and it could
// not be mistaken for a quoted string; otherwise it returns s quoted in Go
// syntax (strconv.Quote), which escapes exactly the runes that are not
// printable and keeps the others readable.
func Name(s string) string {
	if safe(s) && !strings.HasPrefix(s, `"`) {
		return s
	}
	return strconv.Quote(s)
}

// Line escapes the runes of s that are not printable, in place and without
// quotes (the escapes strconv.Quote uses: \x1b, \u202e, ...), and a
// backslash as \\ only where that is needed to tell it from an escape. It is
// for whole messages (an error from the file system naming a sandbox path)
// whose words must stay as they are; newlines and tabs are escaped too, so a
// message stays one line.
func Line(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == '\\':
			b.WriteString(`\\`)
		case printable(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

func safe(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !printable(r) {
			return false
		}
		i += n
	}
	return true
}

// printable: letters, marks, numbers, punctuation, symbols and the ASCII
// space. unicode.IsPrint leaves out control and format characters (Cc, Cf:
// ESC, the bidirectional overrides, zero-width joiners) and the other spaces.
func printable(r rune) bool { return unicode.IsPrint(r) }
