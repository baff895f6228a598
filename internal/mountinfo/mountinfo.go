// Package mountinfo reads this process's mount table,
// /proc/self/mountinfo (proc(5)).
package mountinfo

import (
	"bufio"
	"bytes"
	"os"
	"strings"
)

// Mount is what a line of the table says of one mount: its mount point and
// whether it is mounted read-write.
type Mount struct {
	Point string
	RW    bool
}

// Read parses /proc/self/mountinfo.
func Read() ([]Mount, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return Parse(raw), nil
}

// Parse reads the mount point and the per-mount read-write flag of each
// line: field 5 is the mount point, with space, tab, newline and backslash
// escaped as \ooo; field 6 the mount options. Lines it cannot read are left
// out.
func Parse(raw []byte) []Mount {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields are separated by single spaces; anything else (a form feed,
		// a non-breaking space) is part of a name.
		f := strings.Split(sc.Text(), " ")
		if len(f) < 6 {
			continue
		}
		point, ok := unescape(f[4])
		if !ok {
			continue
		}
		rw := false
		for _, o := range strings.Split(f[5], ",") {
			if o == "rw" {
				rw = true
			}
		}
		out = append(out, Mount{Point: point, RW: rw})
	}
	return out
}

// unescape undoes the kernel's octal escapes (\040 for a space).
func unescape(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", false
		}
		v := 0
		for _, c := range []byte(s[i+1 : i+4]) {
			if c < '0' || c > '7' {
				return "", false
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), true
}
