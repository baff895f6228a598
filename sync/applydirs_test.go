package sync

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPushIntoDirTheSandboxReplaced: the helper applies a push through one
// cached root per directory. A background job in the sandbox replaced a
// synced directory with a symlink out of the tree (and another with a
// file); the host then changes several files in each. Every file must land
// in a real directory at its path, nothing may be written through the
// symlink, and what the sandbox put there is kept as a conflict copy beside it in the sandbox.
func TestPushIntoDirTheSandboxReplaced(t *testing.T) {
	p := newPair(t)
	outside := t.TempDir()
	for _, d := range []string{"lnk", "file"} {
		for _, f := range []string{"a", "b", "c"} {
			put(t, filepath.Join(p.host, d, f), "v1 "+d+f)
		}
	}
	p.sync(nil)
	// The sandbox's background job.
	os.RemoveAll(filepath.Join(p.sandbox, "lnk"))
	if err := os.Symlink(outside, filepath.Join(p.sandbox, "lnk")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(p.sandbox, "file"))
	put(t, filepath.Join(p.sandbox, "file"), "the sandbox's file")
	// The host's edits, pushed by the next round trip.
	for _, d := range []string{"lnk", "file"} {
		for _, f := range []string{"a", "b", "c"} {
			put(t, filepath.Join(p.host, d, f), "v2 "+d+f)
		}
	}
	var during []string
	p.sync(func() {
		for _, d := range []string{"lnk", "file"} {
			fi, err := os.Lstat(filepath.Join(p.sandbox, d))
			if err != nil || !fi.IsDir() {
				t.Errorf("sandbox %s after the push: %v %v, want a directory", d, fi, err)
				continue
			}
			for _, f := range []string{"a", "b", "c"} {
				during = append(during, d+"/"+f+"="+read(t, filepath.Join(p.sandbox, d, f)))
			}
		}
	})
	if got := strings.Join(during, " "); got != "lnk/a=v2 lnka lnk/b=v2 lnkb lnk/c=v2 lnkc file/a=v2 filea file/b=v2 fileb file/c=v2 filec" {
		t.Errorf("sandbox after the push: %s", got)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the push wrote through the sandbox's symlink: %d entries outside the tree", len(ents))
	}
	if l, err := os.Readlink(filepath.Join(p.sandbox, "lnk"+ConflictSuffix)); err != nil || l != outside {
		t.Errorf("the sandbox's symlink was not kept as a conflict copy: %q %v", l, err)
	}
	if got := read(t, filepath.Join(p.sandbox, "file"+ConflictSuffix)); got != "the sandbox's file" {
		t.Errorf("the sandbox's file was not kept as a conflict copy: %q", got)
	}
}
