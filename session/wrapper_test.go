package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestBashFallbackShOnly runs the bash tool's command as an image without
// bash does (the runner runs cmd.Fallback when /bin/bash is missing): the
// sh wrapper under busybox sh, with the environment the bash path set up.
// The command behaves as `sh -c` there, the cwd is reported on fd 3, and
// the BASH_ENV meant for bash does not reach the command.
func TestBashFallbackShOnly(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox is needed (apt-get install busybox-static)")
	}
	bin := t.TempDir()
	if err := os.Symlink(busybox, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	s := &Session{m: NewManager(t.TempDir(), nil, nil), params: Params{CodeDirs: []string{"/usr"}}}
	for _, command := range []string{
		"nonexistent_cmd_xyz",
		"echo a\necho b\nnonexistent_cmd_xyz",
		`echo "[${BASH_ENV-unset}]"`,
		`env | grep -c BASH_ENV || true`,
		`echo "$0" $#`,
	} {
		cmd, _, _ := s.command(Run{Command: command, Shell: "/bin/bash"}, true)
		if len(cmd.Fallback) != 9 || cmd.Fallback[7] != "/bin/bash" || !slices.Contains(cmd.Env, "BASH_ENV=/dev/fd/4") {
			t.Fatalf("the bash tool's command has no sh fallback: %q, env %q", cmd.Fallback, cmd.Env)
		}
		fb := slices.Clone(cmd.Fallback)
		fb[7] = "/nonexistent/bash" // this host has bash: stand for an image without
		env := slices.DeleteFunc(slices.Clone(cmd.Env), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
		env = append(env, "PATH="+bin)
		fd3 := filepath.Join(t.TempDir(), "fd3")
		f, err := os.Create(fd3)
		if err != nil {
			t.Fatal(err)
		}
		w := exec.Command(busybox, append([]string{"sh"}, fb[1:]...)...)
		w.Env, w.ExtraFiles, w.Dir = env, []*os.File{f}, "/"
		got, _ := w.CombinedOutput()
		f.Close()
		plain := exec.Command(busybox, "sh", "-c", command, "sh")
		plain.Env, plain.Dir = []string{"PATH=" + bin}, "/usr"
		want, _ := plain.CombinedOutput()
		if string(got) != string(want) {
			t.Errorf("%q: the fallback printed\n%s\nsh -c prints\n%s", command, got, want)
		}
		if cwd, _ := os.ReadFile(fd3); string(cwd) != "/usr\n" {
			t.Errorf("%q: fd 3 got %q, want /usr", command, cwd)
		}
	}
}
