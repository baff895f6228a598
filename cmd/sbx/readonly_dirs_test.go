package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyDirsComeBack: a command that leaves read-only directories
// with files in them (chmod 0555, `cp -r` out of Go's module cache, a
// tarball's modes) must not wedge the session. As an ordinary user the
// host applied the directory's mode first and then could not create its
// files (openat .sbx-tmp-...: permission denied): that command's changes,
// and every later command's, failed to come back ("sync failed", exit 125)
// until the release, which lost them. sbx runs as an ordinary user here
// (uid 65534 when the tests run as root, who is never refused).
func TestReadOnlyDirsComeBack(t *testing.T) {
	w := newWorld(t)
	sbxAs := ordinaryUser(t, w)
	env := []string{"SBX_CACHE=none"}
	r := sbxAs(t, w.code, env, "exec", "--keep", "--session", "ro", "--", `mkdir -p ro/sub && echo a > ro/sub/f && echo b > ro/g && chmod 0555 ro/sub ro`)
	if r.code != 0 {
		t.Fatalf("a command leaving read-only directories: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for name, want := range map[string]string{"ro/g": "b\n", "ro/sub/f": "a\n"} {
		if b, err := os.ReadFile(filepath.Join(w.code, name)); err != nil || string(b) != want {
			t.Fatalf("%s on the host: %q, %v", name, b, err)
		}
	}
	for _, d := range []string{"ro", "ro/sub"} {
		if fi, err := os.Stat(filepath.Join(w.code, d)); err != nil || fi.Mode().Perm() != 0o555 {
			t.Fatalf("%s on the host: %v, %v; want mode 0555 as the sandbox left it", d, fi.Mode(), err)
		}
	}
	if r := sbxAs(t, w.code, env, "exec", "--session", "ro", "--", `echo next > next.txt && echo c > ro/sub/h 2>/dev/null; chmod u+w ro/sub && echo c > ro/sub/h && chmod u-w ro/sub`); r.code != 0 {
		t.Fatalf("the next command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "next.txt")); string(b) != "next\n" {
		t.Fatalf("the next command's change did not come back: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "ro", "sub", "h")); string(b) != "c\n" {
		t.Fatalf("a file added to the read-only directory did not come back: %q", b)
	}
	// Removed again: the sandbox makes them writable and removes them.
	if r := sbxAs(t, w.code, env, "exec", "--session", "ro", "--", `chmod -R u+w ro && rm -rf ro`); r.code != 0 {
		t.Fatalf("removing them: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(w.code, "ro")); err == nil {
		t.Fatal("the removed directory is still on the host")
	}
	if r := sbxAs(t, w.code, env, "release", "--session", "ro"); r.code != 0 || strings.Contains(r.stderr, "lost") {
		t.Fatalf("release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestUnreadableDirDoesNotWedge: a command that leaves a directory its
// owner may not read or search (chmod 000; 0311; 0644) in the workspace.
// As an ordinary user the workspace's files are the user's, and the disk
// limit's walk of it failed there ("measure the sandbox's workspace against
// the disk limit: open ...: permission denied; nothing of this command was
// brought back"), for that command and every later one, until the release
// lost them all. The walk now opens such a directory of the user's with its
// owner's bits added for the walk, and the limit still counts what it
// holds.
func TestUnreadableDirDoesNotWedge(t *testing.T) {
	w := newWorld(t)
	sbxAs := ordinaryUser(t, w)
	env := []string{"SBX_CACHE=none"}
	r := sbxAs(t, w.code, env, "exec", "--keep", "--session", "ur", "--", `mkdir a b c && echo y > a/g && echo y > b/g && echo y > c/g && chmod 000 a && chmod 0311 b && chmod 0644 c`)
	if r.code != 0 {
		t.Fatalf("a command leaving unreadable directories: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "exec", "--session", "ur", "--", `echo next > next.txt`); r.code != 0 {
		t.Fatalf("the next command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "next.txt")); string(b) != "next\n" {
		t.Fatalf("the next command's change did not come back: %q", b)
	}
	// The modes are the sandbox's again after the walk.
	if r := sbxAs(t, w.code, env, "exec", "--session", "ur", "--", `stat -c '%a %n' a b c`); r.code != 0 || r.stdout != "0 a\n311 b\n644 c\n" {
		t.Fatalf("the directories' modes after the walks: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	// The limit counts what they hold: 3 MiB hidden under a locked
	// directory is over a 2 MiB limit.
	r = sbxAs(t, w.code, append(env, "SBX_DISK=2M"), "exec", "--session", "ur", "--", `chmod 700 a && head -c 3145728 /dev/zero > a/big && chmod 000 a`)
	if r.code != 125 || !strings.Contains(r.stderr, "disk") {
		t.Fatalf("3 MiB in a locked directory under a 2 MiB limit: exit %d, want the disk limit's refusal\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := sbxAs(t, w.code, env, "release", "--session", "ur"); r.code != 0 {
		t.Fatalf("release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
