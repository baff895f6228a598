package session

import (
	"os/exec"
	"strings"
	"testing"
)

// FuzzShQuote: what shQuote makes of a name is that name to a shell, byte
// for byte, whatever it holds (quotes, $( ), backquotes, backslashes,
// newlines): bash itself is the oracle. The start directory that bash's
// script names is the sandbox's choice (its last cwd report), so a name
// that broke out of its quotes would be code in every later command's
// shell.
func FuzzShQuote(f *testing.F) {
	for _, s := range []string{"", "/a/b", "it's", `'\''`, "$(touch x)", "`id`", `\`, "a\nb", "'", "''", `"$HOME"`, "-n", "a b\tc", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return // no argument, path or script can hold a NUL (bashEnvScript refuses it)
		}
		out, err := exec.Command("/bin/bash", "-c", "printf %s "+shQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Fatalf("%q quoted as %s: bash printed %q (%v)", s, shQuote(s), out, err)
		}
	})
}
