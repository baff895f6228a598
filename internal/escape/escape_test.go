package escape

import (
	"strconv"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "src/main.go", "src/main.go"},
		{"utf-8 kept", "docs/résumé-日本.md", "docs/résumé-日本.md"},
		{"space kept", "a b", "a b"},
		{"escape sequence", "x\x1b]52;c;ZXZpbA==\x07y", `"x\x1b]52;c;ZXZpbA==\ay"`},
		{"screen clear", "\x1b[2J", `"\x1b[2J"`},
		{"newline", "a\nsbx: fake line", `"a\nsbx: fake line"`},
		{"bidi override", "a\u202egpj.exe", `"a\u202egpj.exe"`},
		{"c1 control", "a\u009bb", `"a\u009bb"`},
		{"invalid utf-8", "a\xffb", `"a\xffb"`},
		{"looks quoted", `"x"`, `"\"x\""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Name(c.in); got != c.want {
				t.Fatalf("Name(%q) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "open a/b: permission denied", "open a/b: permission denied"},
		{"escape in the middle", "open a\x1b[2Jb: no such file", `open a\x1b[2Jb: no such file`},
		{"backslash kept apart", "a\\x1b\x1b", `a\\x1b\x1b`},
		{"invalid byte", "a\xffb", `a\xffb`},
		{"newline", "a\nb", `a\nb`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Line(c.in); got != c.want {
				t.Fatalf("Line(%q) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

// FuzzEscape: whatever the input, the output holds no rune a terminal acts
// on, and Name's output reads back to the input. The oracle is a check of
// each output byte against the control ranges, not the escaping code.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a", "\x1b[2J", "a\u202eb", "\xff", `"`, "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Name(s), Line(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
			}
			for _, r := range out {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
					t.Fatalf("rune %U left in %q (from %q)", r, out, s)
				}
			}
		}
		n := Name(s)
		if n == s {
			return
		}
		back, err := strconv.Unquote(n)
		if err != nil || back != s {
			t.Fatalf("Name(%q) = %s does not read back (%q, %v)", s, n, back, err)
		}
	})
}
