package sync

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlantedRepoRule(t *testing.T) {
	host := t.TempDir()
	put(t, filepath.Join(host, "fixture.git/HEAD"), "ref: refs/heads/main\n")
	put(t, filepath.Join(host, "plain/HEAD"), "a file that only happens to be named HEAD\n")
	root, err := os.OpenRoot(host)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	heads := map[string]bool{}
	for _, c := range []struct{ p, body string }{
		{"evil/HEAD", "ref: refs/heads/main\n"},
		{"hex/Head", strings.Repeat("ab", 20) + "\n"},
		{"notes/HEAD", "meeting notes\n"},
		{".git/refs/remotes/origin/HEAD", "ref: refs/remotes/origin/main\n"},
	} {
		noteHead(heads, &Item{Path: c.p, Entry: Entry{Mode: 0o644, Size: int64(len(c.body))}, Body: strings.NewReader(c.body)})
	}
	noteHead(heads, &Item{Path: "ln/HEAD", Entry: link("refs/heads/main")})
	for _, c := range []struct {
		name    string
		p       string
		deleted bool
		want    bool
	}{
		{"a git HEAD in the patch", "evil/HEAD", false, true},
		{"a hex HEAD in another spelling", "hex/Head", false, true},
		{"a symlink HEAD", "ln/HEAD", false, true},
		{"a HEAD that is no git HEAD", "notes/HEAD", false, false},
		{"config beside a patch HEAD", "evil/config", false, true},
		{"config in another case", "evil/CONFIG", false, true},
		{"hooks beside a patch HEAD", "evil/hooks/post-update", false, true},
		{"commondir beside a patch HEAD", "hex/commondir", false, true},
		{"alternates beside a patch HEAD", "evil/objects/info/alternates", false, true},
		{"objects beside a patch HEAD", "evil/objects/ab/cdef", false, false},
		{"refs beside a patch HEAD", "evil/refs/heads/main", false, false},
		{"config of a host fixture", "fixture.git/config", false, true},
		{"deleting a host fixture's config", "fixture.git/config", true, true},
		{"a hook of a host fixture", "fixture.git/hooks/pre-receive", false, true},
		{"objects of a host fixture", "fixture.git/objects/ab/cd", false, false},
		{"config beside a plain HEAD", "plain/config", false, false},
		{"config beside a plain patch HEAD", "notes/config", false, false},
		{"an ordinary config", "src/config", false, false},
		{"an ordinary info dir", "docs/info/x.md", false, false},
		{"the top-level .git is not judged here", ".git/refs/remotes/origin/HEAD", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := &repoState{heads: heads}
			if got := rs.plants(root, c.p, c.deleted); got != c.want {
				t.Fatalf("plants(%q) = %v, want %v", c.p, got, c.want)
			}
		})
	}
}

// FuzzGitHeadShaped: whenever the host's own git takes a directory with
// this HEAD, an objects/ and a refs/ for a repository, gitHeadShaped says
// so (it may say so of more).
func FuzzGitHeadShaped(f *testing.F) {
	git, err := exec.LookPath("git")
	if err != nil {
		f.Fatal("git is missing: install git")
	}
	for _, s := range []string{"ref: refs/heads/main\n", "ref:refs/x", strings.Repeat("a", 40), strings.Repeat("0", 64) + "\n", "ref: heads/main", "junk", " ref: refs/heads/x", "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 300 {
			return
		}
		d := t.TempDir()
		repo := filepath.Join(d, "r")
		os.MkdirAll(filepath.Join(repo, "objects"), 0o755)
		os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
		os.WriteFile(filepath.Join(repo, "HEAD"), b, 0o644)
		cmd := exec.Command(git, "rev-parse", "--absolute-git-dir")
		cmd.Dir = repo
		cmd.Env = []string{"GIT_CEILING_DIRECTORIES=" + d, "HOME=" + d, "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		isRepo := err == nil && strings.TrimSpace(string(out)) == repo
		if isRepo && !gitHeadShaped(b) {
			t.Fatalf("git takes HEAD %q for a repository's, gitHeadShaped does not", b)
		}
	})
}
