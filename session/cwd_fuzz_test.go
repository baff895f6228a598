package session

import (
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/sandbox"
)

// cwdOracle says, without filepath, whether a cwd report is taken: one
// absolute path of at most PATH_MAX bytes, no NUL, no newline inside, no
// empty, "." or ".." element, no trailing slash but for "/" itself; an
// optional final newline.
func cwdOracle(report string) (dir string, ok bool) {
	if len(report) > sandbox.MaxFd3 {
		return "", false
	}
	p := report
	if n := len(p); n > 0 && p[n-1] == '\n' {
		p = p[:n-1]
	}
	if p == "" || len(p) > 4096 || p[0] != '/' {
		return "", false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 0 || p[i] == '\n' {
			return "", false
		}
	}
	if p == "/" {
		return p, true
	}
	for _, el := range strings.Split(p[1:], "/") {
		if el == "" || el == "." || el == ".." {
			return "", false
		}
	}
	return p, true
}

func FuzzCwdReport(f *testing.F) {
	for _, s := range []string{"/\n", "/a/b\n", "/a/b", "a/b\n", "/a/../b\n", "/a//b\n", "/a/\n", "junk/a\n", "/a\n/b\n", "/a\x00\n", "\n", "", "/" + strings.Repeat("x", 4095) + "\n", "/" + strings.Repeat("x", 4096)} {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, report string, chunk uint8) {
		var c cwdReport
		for rest := report; rest != ""; {
			n := min(len(rest), int(chunk)+1)
			c.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		dir, refused := c.path()
		want, ok := cwdOracle(report)
		switch {
		case ok && (refused != "" || dir != want):
			t.Fatalf("%q: got %q, refused %q; want %q", report, dir, refused, want)
		case !ok && report != "" && report != "\n" && (dir != "" || refused == ""):
			t.Fatalf("%q: taken as %q, want refused", report, dir)
		case len(c.buf) > sandbox.MaxFd3:
			t.Fatalf("kept %d bytes", len(c.buf))
		}
	})
}
