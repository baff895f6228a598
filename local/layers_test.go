//go:build linux

package local

import (
	"strings"
	"testing"
)

// TestProcLayerJudgesWhatTheCommandSaw covers how the probe's mount list is
// judged: every existing path of the sets must be a read-only mount point.
func TestProcLayerJudgesWhatTheCommandSaw(t *testing.T) {
	masked := "proc /proc proc rw,nosuid,nodev,noexec 0 0\n" +
		"proc /proc/sys proc ro,nosuid,nodev,noexec 0 0\n" +
		"tmpfs /proc/keys tmpfs ro,nosuid 0 0\n"
	for _, c := range []struct {
		name, mounts, exists string
		active               bool
		detail               string
	}{
		{"all masked", masked, "/proc/sys\n/proc/keys\n", true, "2 paths"},
		{"sys writable", strings.Replace(masked, "ro,nosuid,nodev,noexec 0 0\ntmpfs", "rw,nosuid,nodev,noexec 0 0\ntmpfs", 1), "/proc/sys\n/proc/keys\n", false, "/proc/sys"},
		{"keys not covered", masked, "/proc/sys\n/proc/keys\n/proc/kcore\n", false, "/proc/kcore"},
		{"nothing found", masked, "", false, "none of the masked paths"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := procLayer(map[string]string{"mounts": c.mounts, "exists": c.exists})
			if l.Active != c.active || !strings.Contains(l.Detail, c.detail) {
				t.Fatalf("got %+v, want active=%v with %q", l, c.active, c.detail)
			}
		})
	}
}

func TestProbeSections(t *testing.T) {
	s := probeSections("## status\nSeccomp:\t0\n## mounts\na b c ro 0 0\n## end\n")
	if s["status"] != "Seccomp:\t0\n" || s["mounts"] != "a b c ro 0 0\n" {
		t.Fatalf("sections %q", s)
	}
}
