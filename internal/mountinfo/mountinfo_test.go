package mountinfo

import (
	"fmt"
	"strings"
	"testing"
)

// mangle escapes a path as the kernel's seq_path does for mountinfo (space,
// tab, newline and backslash as \ooo): the oracle the parser is checked
// against.
func mangle(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func TestParse(t *testing.T) {
	raw := "22 1 0:21 / / ro,nosuid - tmpfs tmpfs ro\n" +
		"23 22 8:1 /home/u/my\\040code /home/u/my\\040code rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"24 22 0:22 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw\n" +
		"25 22 0:5 / /proc rw,nosuid - proc proc rw\n" +
		"bad line\n" +
		"26 22 0:23 / /bad\\04 rw - tmpfs tmpfs rw\n"
	got := Parse([]byte(raw))
	want := []Mount{{"/", false}, {"/home/u/my code", true}, {"/tmp", true}, {"/proc", true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestReadHasTheRoot(t *testing.T) {
	ms, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Point == "/" {
			return
		}
	}
	t.Fatalf("this process's mount table has no /: %v", ms)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"/srv/code", "/home/u/my code", "/a\\b", "/t\tn\nx", "/ü/é"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, point string, rw bool) {
		if point == "" {
			return
		}
		opts := "ro,nosuid"
		if rw {
			opts = "rw,nosuid"
		}
		line := "36 35 98:0 /mnt1 " + mangle(point) + " " + opts + " master:1 - ext3 /dev/root rw\n"
		got := Parse([]byte(line))
		if len(got) != 1 || got[0].Point != point || got[0].RW != rw {
			t.Fatalf("line %q: parsed %v, want {%q %v}", line, got, point, rw)
		}
		// Arbitrary bytes never make it panic.
		Parse([]byte(point))
	})
}
