//go:build linux

package local

import "testing"

func TestWritableMount(t *testing.T) {
	for p, w := range map[string]bool{"/": false, "/dev": false, "/dev/x": false, "/proc/sys": false, "/sys": false,
		"/home/u/my code": true, "/devices": true, "/srv/code": true, "relative": false} {
		if writableMount(p) != w {
			t.Errorf("writableMount(%q) = %v, want %v", p, !w, w)
		}
	}
}
