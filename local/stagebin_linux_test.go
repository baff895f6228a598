package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// A writer of the binary's directory who swaps the file after it was
// checked (rename over it) starts nothing: the stage runs the inode that
// was checked, through its descriptor.
func TestStageBinarySwappedAfterCheck(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, SandboxBinName)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	// A copy of this test binary is the same build as this process.
	if err := os.WriteFile(path, self, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := openStageBin(path, true)
	if err != nil {
		t.Fatalf("the same build refused: %v", err)
	}
	defer f.Close()
	evil := filepath.Join(dir, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho SWAPPED\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(evil, path); err != nil {
		t.Fatal(err)
	}
	prog, files, env := commandFor(f, nil)
	cmd := &exec.Cmd{Path: prog, Args: []string{"stage", "-test.run=^$"}, ExtraFiles: files, Env: env}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "SWAPPED") || !strings.Contains(string(out), "PASS") {
		t.Fatalf("the stage ran %s: %v\n%s", prog, err, out)
	}
	// Without the descriptor, the path would have run the swapped file.
	out, _ = exec.Command(path).CombinedOutput()
	if !strings.Contains(string(out), "SWAPPED") {
		t.Fatalf("the swap did not take: %s", out)
	}
}

// sameBuild's rules, on build information as debug.ReadBuildInfo gives it.
func TestSameBuild(t *testing.T) {
	bi := func(goVer, ver string, kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: goVer, Main: debug.Module{Path: "github.com/sbx-sh/sbx", Version: ver}}
		for i := 0; i+1 < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	clean := []string{"vcs.revision", "abc", "vcs.time", "2026-01-01T00:00:00Z", "vcs.modified", "false"}
	dirty := []string{"vcs.revision", "abc", "vcs.time", "2026-01-01T00:00:00Z", "vcs.modified", "true"}
	for _, c := range []struct {
		name        string
		ours, other *debug.BuildInfo
		explicit    bool
		ok          bool
	}{
		{"same clean build", bi("go1.26", "(devel)", clean...), bi("go1.26", "(devel)", clean...), false, true},
		{"another Go", bi("go1.26", "(devel)", clean...), bi("go1.25", "(devel)", clean...), true, false},
		{"another module version", bi("go1.26", "v1.0.0"), bi("go1.26", "v1.0.1"), true, false},
		{"same module version, no vcs", bi("go1.26", "v1.0.0"), bi("go1.26", "v1.0.0"), false, true},
		{"another revision", bi("go1.26", "(devel)", clean...), bi("go1.26", "(devel)", "vcs.revision", "abd", "vcs.time", "2026-01-01T00:00:00Z", "vcs.modified", "false"), true, false},
		{"another time", bi("go1.26", "(devel)", clean...), bi("go1.26", "(devel)", "vcs.revision", "abc", "vcs.time", "2026-01-02T00:00:00Z", "vcs.modified", "false"), true, false},
		{"another -ldflags", bi("go1.26", "(devel)", clean...), bi("go1.26", "(devel)", append([]string{"-ldflags", "-X main.x=y"}, clean...)...), true, false},
		{"dirty tree beside", bi("go1.26", "(devel)", dirty...), bi("go1.26", "(devel)", dirty...), false, false},
		{"dirty tree named", bi("go1.26", "(devel)", dirty...), bi("go1.26", "(devel)", dirty...), true, true},
		{"ours clean, theirs dirty, beside", bi("go1.26", "(devel)", clean...), bi("go1.26", "(devel)", dirty...), false, false},
		{"devel without vcs beside", bi("go1.26", "(devel)"), bi("go1.26", "(devel)"), false, false},
		{"devel without vcs named", bi("go1.26", "(devel)"), bi("go1.26", "(devel)"), true, true},
	} {
		err := sameBuild(c.ours, c.other, c.explicit)
		if (err == nil) != c.ok {
			t.Errorf("%s: sameBuild = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
