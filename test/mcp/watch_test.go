package mcptest

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWatchedSyncThroughMCP drives a real sbx-mcp, whose session watches
// the code dir (host side) and whose local worker watches the workspace
// (sandbox side), through what each watcher once missed: a directory the
// sync itself made on the other side, then changed there; and then a run of
// random edits on both sides, with the trees compared after each call.
func TestWatchedSyncThroughMCP(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	// The pull-back makes d on the host; the host then changes what is in it.
	c.bash("mkdir -p d && echo s1 > d/f")
	if got := e.read("d/f"); got != "s1\n" {
		t.Fatalf("d/f on the host: %q", got)
	}
	e.write("d/f", "h1\n")
	e.write("d/g", "h2\n")
	wantContains(t, c.bash("cat d/f d/g"), "h1\nh2\n")
	// The push makes e in the sandbox; a command then writes into it.
	e.write("e/x", "h3\n")
	wantContains(t, c.bash("cat e/x && echo s2 > e/y"), "h3")
	if got := e.read("e/y"); got != "s2\n" {
		t.Fatalf("e/y, written in the sandbox in a directory the push made: host has %q", got)
	}
	wantContains(t, c.bash("echo s3 > e/x; echo s4 > e/z"), "")
	if e.read("e/x") != "s3\n" || e.read("e/z") != "s4\n" {
		t.Fatalf("the sandbox's second edits in e: host has %q %q", e.read("e/x"), e.read("e/z"))
	}
	// Random edits on both sides.
	rng := rand.New(rand.NewSource(1))
	dirs := []string{"p", "p/q", "r"}
	for i := 0; i < 20; i++ {
		dir := dirs[rng.Intn(len(dirs))]
		name := fmt.Sprintf("%s/f%d", dir, rng.Intn(4))
		switch rng.Intn(3) {
		case 0:
			e.write(name, fmt.Sprintf("host %d\n", i))
		case 1:
			os.RemoveAll(filepath.Join(e.code, dir))
		}
		sdir := dirs[rng.Intn(len(dirs))]
		sname := fmt.Sprintf("%s/f%d", sdir, rng.Intn(4))
		var cmd string
		switch rng.Intn(3) {
		case 0:
			cmd = fmt.Sprintf("mkdir -p %s && echo sandbox %d > %s", sdir, i, sname)
		case 1:
			cmd = "rm -rf " + sdir
		default:
			cmd = fmt.Sprintf("mkdir -p %s && echo sandbox%d > %s.tmp && mv %s.tmp %s", sdir, i, sname, sname, sname)
		}
		c.bash(cmd + "; echo ok")
		// The sandbox's tree, listed with contents, against the host's.
		out := c.bash(`echo BEGIN; find . -path ./.git -prune -o -type f -print | sort | while read f; do printf '%s=%s\n' "$f" "$(cat "$f")"; done; echo END`)
		listing := out
		if a, b := strings.Index(out, "BEGIN\n"), strings.Index(out, "END\n"); a >= 0 && b > a {
			listing = out[a+len("BEGIN\n") : b]
		}
		if want := hostListing(t, e.code); strings.TrimSpace(listing) != want {
			t.Fatalf("call %d (%s): the sandbox has\n%s\nthe host\n%s", i, cmd, listing, want)
		}
	}
}

// hostListing lists the code dir as the sandbox's find loop above does.
func hostListing(t *testing.T, root string) string {
	var lines []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			lines = append(lines, "./"+rel+"="+strings.TrimSuffix(string(b), "\n"))
		}
		return nil
	})
	return strings.Join(lines, "\n")
}
