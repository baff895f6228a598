package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShellWrapperShOnly runs the command wrapper as a busybox image (the
// cluster's minimal one) does: no bash, only busybox sh. The command's
// output and errors must be what `sh -c` prints there, and the cwd still
// reported on fd 3.
func TestShellWrapperShOnly(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox is needed (apt-get install busybox-static)")
	}
	bin := t.TempDir()
	if err := os.Symlink(busybox, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin}
	for _, command := range []string{
		"nonexistent_cmd_xyz",
		"echo a\necho b\nnonexistent_cmd_xyz",
		"echo $LINENO\necho $LINENO",
		`echo "$0" $#`,
		"true\nif",
	} {
		fd3 := filepath.Join(t.TempDir(), "fd3")
		f, err := os.Create(fd3)
		if err != nil {
			t.Fatal(err)
		}
		w := exec.Command(busybox, "sh", "-c", shellWrapper, "sbx", command, "/usr", "/", "/nonexistent/bash", "track")
		w.Env, w.ExtraFiles = env, []*os.File{f}
		got, _ := w.CombinedOutput()
		f.Close()
		plain := exec.Command(busybox, "sh", "-c", command, "sh")
		plain.Env, plain.Dir = env, "/usr"
		want, _ := plain.CombinedOutput()
		if string(got) != string(want) {
			t.Errorf("%q: the wrapper printed\n%s\nsh -c prints\n%s", command, got, want)
		}
		if cwd, _ := os.ReadFile(fd3); !strings.Contains(command, "if") && string(cwd) != "/usr\n" {
			t.Errorf("%q: fd 3 got %q, want /usr", command, cwd)
		}
	}
}
