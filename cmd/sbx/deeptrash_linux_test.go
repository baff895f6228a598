package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// TestReleaseRemovesDeepWorkspace: a workspace the sandbox filled with a
// chain of directories deeper than sbx's descriptor limit (here 1024, as
// many a host's default), with directories it made unreadable or read-only
// along it and links to a host directory and file, is removed whole by
// the remover after the release, as an ordinary user, and nothing a link
// names is touched. os.RemoveAll held one descriptor per level and left
// the chain's end in the trash for good (each next start's sweep started
// a remover that failed the same way); the chmod walk through an os.Root
// that followed took time quadratic in the depth.
func TestReleaseRemovesDeepWorkspace(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the sandbox builds the tree with %s: install python3 (%v)", python, err)
	}
	w := newWorld(t)
	victim := tempDir(t)
	keep := filepath.Join(victim, "keep.txt")
	os.WriteFile(keep, []byte("host\n"), 0o644)
	os.WriteFile(filepath.Join(w.code, ".sbxignore"), []byte("deep/\n"), 0o644)
	ordinaryUser(t, w, victim) // the state, the code and the victim are uid 65534's
	script := python + ` -c 'import os
os.mkdir("deep"); os.chdir("deep")
for i in range(3000):
    if i % 97 == 0:
        open("f", "w").write("x")
        os.symlink("` + victim + `", "dlink")
        os.symlink("` + keep + `", "flink")
    if i in (5, 2500):
        os.mkdir("z"); open("z/f", "w").write("x"); os.chmod("z", 0)
    os.mkdir("a"); os.chdir("a")
    if i in (10, 1500):
        os.chmod("..", 0o555)
os.mkdir("locked"); open("locked/f", "w").write("x"); os.chmod("locked", 0)
print("built")'`
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "prlimit", "--nofile=1024:1024", "--",
		"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sbxBin, "exec", "--", script)
	cmd.Dir, cmd.Env = w.code, w.env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "built") {
		t.Fatalf("sbx exec: %v\n%s", err, out)
	}
	trash := filepath.Join(w.state, "sbx", "sessions.trash")
	if !testenv.WaitFor(60*time.Second, func() bool {
		entries, err := os.ReadDir(trash)
		return err == nil && len(entries) == 0
	}) {
		entries, _ := os.ReadDir(trash)
		t.Fatalf("the released workspace is still in %s after 60s: %v", trash, entries)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "host\n" {
		t.Fatalf("the host file a workspace link named: %q, %v", b, err)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the host directory a workspace link named: %v, %v", fi, err)
	}
}
