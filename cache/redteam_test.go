package cache

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPlantedSetuidUnreachable: a sandbox can make a setuid binary of its
// own host uid in a shared cache (chmod 6755 is its right as the file's
// owner). No other host user may reach it, or any local user could run it
// and become the sandbox's uid.
func TestPlantedSetuidUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (it runs a probe as another uid)")
	}
	// A cache root other users can traverse, as $XDG_CACHE_HOME may be.
	top, err := os.MkdirTemp("", "sbx-rt-cache")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(top, "sbx")
	const uid = 1000000123
	for _, self := range []int{uid, os.Geteuid()} {
		if _, _, err := Plan(Config{Mode: "shared", Root: root}, t.TempDir(), self, self); err != nil {
			t.Fatal(err)
		}
		base := root
		if self != os.Geteuid() {
			base = filepath.Join(root, "uid-1000000123")
		}
		// What the sandbox does, through its mount of the cache.
		planted := filepath.Join(base, "cache", "suid")
		sh, err := os.ReadFile("/bin/sh")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(planted, sh, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Lchown(planted, self, self)
		if err := os.Chmod(planted, 0o6755); err != nil {
			t.Fatal(err)
		}
		// Another local user (nobody) tries to run it.
		cmd := exec.Command(planted, "-c", "id -u")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("uid 65534 ran %s, a setuid binary a sandbox planted in the shared cache (output %q)", planted, out)
		}
	}
}
