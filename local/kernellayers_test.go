//go:build linux

package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// The tests of the syscall filter and Landlock run the attacks from a real
// sandboxed command through the real `sbx exec`, built from ../cmd/sbx with
// this test binary's own setting of the kernel layers: `go test -tags
// sbx_nokernellayers` runs the same attacks against a build without them,
// which is how each test was seen to fail before the layers existed.

var (
	toolsOnce          sync.Once
	toolSbx, toolProbe string
	toolsErr           error
	toolsDir           string
	sbxBuildTags       []string
)

func kernelTools(t testing.TB) (sbx, probe string) {
	t.Helper()
	toolsOnce.Do(func() {
		toolsDir, toolsErr = os.MkdirTemp("", "sbxk")
		if toolsErr != nil {
			return
		}
		os.Chmod(toolsDir, 0o755)
		if !kernelLayers {
			sbxBuildTags = []string{"-tags", "sbx_nokernellayers"}
		}
		toolSbx, toolsErr = buildSbx(toolsDir, "sbx", sbxBuildTags...)
		if toolsErr != nil {
			return
		}
		toolProbe = filepath.Join(toolsDir, "sysprobe")
		toolsErr = testenv.BuildStatic(toolProbe, "./testdata/sysprobe")
	})
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return toolSbx, toolProbe
}

// buildSbx builds cmd/sbx into dir/name with extra go build arguments.
func buildSbx(dir, name string, args ...string) (string, error) {
	bin := filepath.Join(dir, name)
	return bin, testenv.BuildStatic(bin, "../cmd/sbx", args...)
}

// sbxWorld is a user's machine for `sbx exec`: a home, a state dir and a
// code dir holding the probe.
type sbxWorld struct {
	sbx, home, state, code string
	env                    []string
}

func newSbxWorld(t testing.TB, sbx string) *sbxWorld {
	t.Helper()
	w := &sbxWorld{sbx: sbx}
	for _, d := range []*string{&w.home, &w.state, &w.code} {
		dir, err := os.MkdirTemp("", "sbxk")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		*d = dir
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	os.MkdirAll(filepath.Join(w.code, ".git"), 0o755)
	w.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home, "XDG_STATE_HOME=" + w.state, "LANG=C"}
	t.Cleanup(func() { w.run(t, "release", "--all") })
	return w
}

func (w *sbxWorld) withProbe(t testing.TB, probe string) *sbxWorld {
	t.Helper()
	b, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.code, "sysprobe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs sbx with args in the code dir and returns its combined output
// and exit code.
func (w *sbxWorld) run(t testing.TB, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.sbx, args...)
	cmd.Dir, cmd.Env = w.code, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sbx %v: %v", args, err)
	}
	return out.String(), 0
}

func (w *sbxWorld) exec(t testing.TB, script string) string {
	t.Helper()
	out, code := w.run(t, "exec", "--", script)
	if code != 0 {
		t.Fatalf("sbx exec exited %d:\n%s", code, out)
	}
	return out
}

// wantLines checks that out has each "op: result" line.
func wantLines(t *testing.T, out string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if op, res, ok := strings.Cut(l, ": "); ok {
			got[op] = res
		}
	}
	for op, w := range want {
		if g, ok := got[op]; !ok {
			t.Errorf("%s: no result in the output", op)
		} else if !strings.HasPrefix(g, w) {
			t.Errorf("%s: got %q, want %q", op, g, w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestSandboxSyscallFilterRefusesKernelInterfaces(t *testing.T) {
	sbx, probe := kernelTools(t)
	w := newSbxWorld(t, sbx).withProbe(t, probe)
	want := map[string]string{
		"bpf":            "EPERM",
		"perf":           "EPERM",
		"mount":          "EPERM",
		"kexec":          "EPERM",
		"userfaultfd":    "EPERM",
		"open-by-handle": "EPERM",
		"clone3":         "ENOSYS",
		"clone-user":     "EPERM",
		"vsock":          "EPERM",
		"personality":    "EPERM",
		"tiocsti":        "EPERM",
		"keyadd":         "EPERM",
		// What stays allowed.
		"fork":       "ok",
		"tcp":        "ok",
		"unshare-fs": "ok",
	}
	if runtime.GOARCH == "amd64" {
		want["i386"] = "EPERM"
		want["x32"] = "EPERM"
	}
	var script strings.Builder
	for op := range want {
		fmt.Fprintf(&script, "./sysprobe %s\n", op)
	}
	// util-linux's unshare is single-threaded, so nothing but the filter
	// stops its new user namespace.
	script.WriteString("if unshare -U true 2>/dev/null; then echo 'unshare -U: ok'; else echo 'unshare -U: refused'; fi\n")
	want["unshare -U"] = "refused"
	out := w.exec(t, script.String())
	wantLines(t, out, want)
}

func TestSandboxSyscallFilterIsInherited(t *testing.T) {
	sbx, probe := kernelTools(t)
	w := newSbxWorld(t, sbx).withProbe(t, probe)
	// A child of a child, one in a new session, and one left running in the
	// background, each tries to reach the kernel's keyrings and bpf.
	out := w.exec(t, `sh -c 'sh -c "./sysprobe bpf"'
setsid sh -c './sysprobe keyadd' </dev/null
(./sysprobe perf > bg.out &) ; while ! grep -q perf bg.out 2>/dev/null; do :; done; cat bg.out
grep Seccomp: /proc/self/status | sed 's/^Seccomp:[[:space:]]*/seccomp mode: ok /'`)
	wantLines(t, out, map[string]string{"bpf": "EPERM", "keyadd": "EPERM", "perf": "EPERM", "seccomp mode": "ok 2"})
}

func TestSandboxCannotReadHostKeyring(t *testing.T) {
	sbx, probe := kernelTools(t)
	ring, key, secret := hostKey(t)
	w := newSbxWorld(t, sbx).withProbe(t, probe)
	out := w.exec(t, fmt.Sprintf("./sysprobe keyread %d %d", ring, key))
	if strings.Contains(out, secret) {
		t.Fatalf("the sandbox read the host user's key %d from keyring %d:\n%s", key, ring, out)
	}
	wantLines(t, out, map[string]string{"keyread": "EPERM"})
}

func TestLandlockLimitsWritesToTheSandboxsMounts(t *testing.T) {
	if abi, err := landlockABI(); abi == 0 {
		t.Fatalf("this kernel has no Landlock, so its layer cannot be tested here: %v", err)
	}
	sbx, probe := kernelTools(t)
	w := newSbxWorld(t, sbx).withProbe(t, probe)
	out := w.exec(t, `for p in /dev/planted /proc/self/oom_score_adj /proc/self/comm; do ./sysprobe write "$p" | sed "s|^write|$p|"; done
for p in "$PWD/inside.txt" /tmp/t "$HOME/h" /run/r /dev/shm/s /dev/null; do ./sysprobe write "$p" | sed "s|^write|$p|"; done
mkdir made.d && mv inside.txt made.d/ && rm -r made.d && echo "rename: ok"`)
	wantLines(t, out, map[string]string{
		"/dev/planted":             "EACCES",
		"/proc/self/oom_score_adj": "EACCES",
		"/proc/self/comm":          "EACCES",
		w.code + "/inside.txt":     "ok",
		"/tmp/t":                   "ok",
		"/home/sbx/h":              "ok",
		"/run/r":                   "ok",
		"/dev/shm/s":               "ok",
		"/dev/null":                "ok",
		"rename":                   "ok",
	})
}

func TestNormalWorkloadUnderKernelLayers(t *testing.T) {
	sbx, _ := kernelTools(t)
	w := newSbxWorld(t, sbx)
	os.RemoveAll(filepath.Join(w.code, ".git"))
	goBin := "/usr/local/go/bin/go"
	if p, err := exec.LookPath("go"); err == nil && strings.HasPrefix(p, "/usr/") {
		goBin = p
	}
	if _, err := os.Stat(goBin); err != nil {
		t.Fatalf("a Go toolchain under /usr is needed to build a module in the sandbox: %v", err)
	}
	os.WriteFile(filepath.Join(w.code, "go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(w.code, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"built-and-ran\") }\n"), 0o644)
	script := `set -e
git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm one && git log --oneline | wc -l | sed 's/^/commits: /'
GOFLAGS=-mod=mod GOTOOLCHAIN=local ` + goBin + ` build -o hello . && ./hello
sh -c 'echo sh-ok'
`
	want := []string{"commits: 1", "built-and-ran", "sh-ok"}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		script += "/usr/bin/python3 -c 'import os, tempfile; tempfile.mkstemp(); print(\"python-ok\", os.getpid() > 0)'\n"
		want = append(want, "python-ok True")
	}
	out := w.exec(t, script)
	for _, s := range want {
		if !strings.Contains(out, s) {
			t.Errorf("missing %q in:\n%s", s, out)
		}
	}
	if _, err := os.Stat(filepath.Join(w.code, "hello")); err != nil {
		t.Errorf("the binary built in the sandbox did not come back: %v", err)
	}
}
