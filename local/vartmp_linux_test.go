package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// A code dir under the host's /var/tmp is mounted at its own path in the
// sandbox, as any other is. /var/tmp was a symbolic link to /tmp in the
// sandbox's root: the mount point below it was made through the link
// before the pivot, on the host's /tmp, and the sandbox saw an empty
// directory where its code should be.
func TestCodeDirUnderVarTmp(t *testing.T) {
	name := "sbx-vartmp-" + strings.TrimPrefix(filepath.Base(shortTempDir(t)), "sbxt")
	target := "/var/tmp/" + name + "/code"
	onHostTmp := "/tmp/" + name
	if _, err := os.Lstat(onHostTmp); err == nil {
		t.Fatalf("%s exists before the test", onHostTmp)
	}
	t.Cleanup(func() { os.RemoveAll(onHostTmp) })
	sb, work := claim(t, func(s *sandbox.Spec) {
		s.Mounts = []sandbox.Mount{{Source: filepath.Join(s.StateDir, "work"), Target: target}}
	})
	if err := os.WriteFile(filepath.Join(work, "f"), []byte("code\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := sb.Exec(context.Background(), &sandbox.Cmd{
		Argv: []string{"/bin/sh", "-c", `pwd -P; cat f; echo x > /tmp/seen; cat /var/tmp/seen; [ -L /var/tmp ] && echo link; [ -d /var/tmp ] && echo dir`},
		Dir:  target, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &out, Timeout: 20 * time.Second,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v, exit %d:\n%s", err, res.ExitCode, out.String())
	}
	if want := target + "\ncode\nx\ndir\n"; out.String() != want {
		t.Errorf("in the sandbox: got %q, want %q (the code dir at its path, /var/tmp the sandbox's /tmp, a directory)", out.String(), want)
	}
	if _, err := os.Lstat(onHostTmp); err == nil {
		t.Errorf("the sandbox's set-up made %s on the host", onHostTmp)
	}
}

// noLinkBelow refuses a mount target whose way crosses a symbolic link in
// the new root, and lets one through whose rest is still to be made.
func TestNoLinkBelow(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(root+"/a/b", 0o755)
	os.Symlink("/tmp", root+"/a/l")
	for _, c := range []struct {
		target string
		ok     bool
	}{
		{"/a/b/c/d", true},
		{"/a/b", true},
		{"/new/x", true},
		{"/a/l", false},
		{"/a/l/x", false},
		{"//a//l/../l/x", false},
	} {
		err := noLinkBelow(root, c.target)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.target, err, c.ok)
		}
	}
}

// A mount point below another mount is made through what that mount
// holds, and a workspace holds what an earlier sandbox left there: a
// symbolic link planted at a nested mount's path (a kept session's
// workspace, a sandbox started anew on it) leads, before the pivot, to the
// host's file system. The set-up refuses the mount, naming the link, and
// makes nothing where it points (before, MkdirAll went through the link
// and failed with a bare "file exists").
func TestNestedMountThroughAPlantedLink(t *testing.T) {
	victim := t.TempDir()
	_, _, err := claimErr(t, func(s *sandbox.Spec) {
		work := filepath.Join(s.StateDir, "work")
		other := filepath.Join(s.StateDir, "other")
		os.MkdirAll(other, 0o755)
		if err := os.Symlink(victim, filepath.Join(work, "sub")); err != nil {
			t.Fatal(err)
		}
		s.Mounts = []sandbox.Mount{{Source: work, Target: "/srv/code"}, {Source: other, Target: "/srv/code/sub/made"}}
	})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("claim with a nested mount through a planted link: %v, want a refusal naming the link", err)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("the set-up made %v in %s on the host", ents, victim)
	}
}
