package cluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/sandbox"
)

// The pod chooses what follows the wrapper's marker: the host keeps no more
// than the fd 3 bound of it, however much comes.
func TestFd3SplitterTrailerBounded(t *testing.T) {
	mark := "\x1eTOKEN\x1e"
	var out bytes.Buffer
	s := newFd3Splitter(&out, mark)
	s.Write([]byte("output" + mark))
	chunk := bytes.Repeat([]byte{'/'}, 64<<10)
	for range 256 { // 16 MiB
		if n, err := s.Write(chunk); n != len(chunk) || err != nil {
			t.Fatalf("write past the bound: %d, %v (the stream must go on)", n, err)
		}
	}
	if got := len(s.Trailer()); got != sandbox.MaxFd3+1 {
		t.Fatalf("trailer kept %d bytes, want the bound %d", got, sandbox.MaxFd3+1)
	}
	if out.String() != "output" {
		t.Fatalf("output %q", out.String())
	}
}

// The wrapper itself sends at most the bound (plus one) of a command's fd 3.
func TestWrapperCapsFd3(t *testing.T) {
	out, _, fd3, code := runWrapper(t, "f3", "/", false, []string{"PATH=/usr/bin:/bin"},
		"sh", "-c", `echo ok; head -c 3000000 /dev/zero | tr '\0' x >&3`)
	if code != 0 || out != "ok\n" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if len(fd3) != sandbox.MaxFd3+1 || strings.Trim(fd3, "x") != "" {
		t.Fatalf("fd 3 trailer of %d bytes, want %d", len(fd3), sandbox.MaxFd3+1)
	}
}
