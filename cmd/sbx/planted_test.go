package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/internal/gittest"
)

// Attacks of issue 10, section 3 ("nothing the host runs is planted"), each
// run from a real sandboxed command through the real sbx binary.

// gitWorld is a world whose code dir is a real git repository with one
// commit, for attacks on what the host's git runs.
func gitWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	os.RemoveAll(filepath.Join(w.code, ".git"))
	w.git(t, "init", "-q", "-b", "main")
	w.git(t, "add", "README")
	w.git(t, "commit", "-q", "-m", "one")
	return w
}

// git runs the host's git in the code dir as the user would, with hooks on.
func (w *world) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = w.code
	cmd.Env = append(append([]string{}, w.env...), "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@example.com",
		"GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@example.com", "GIT_EDITOR=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func absent(t *testing.T, p, what string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Fatalf("%s: %s exists on the host", what, p)
	}
}

// TestPlantedHookInHooksPath: with the host's core.hooksPath naming a
// directory in the code dir, a hook the sandbox writes there waits in
// quarantine, and the user's next git commit runs nothing. The second
// directory's name is in no default list: only the host's git config says
// it holds hooks.
func TestPlantedHookInHooksPath(t *testing.T) {
	for _, hooksPath := range []string{".githooks", "ci/git-hooks"} {
		t.Run(hooksPath, func(t *testing.T) {
			w := gitWorld(t)
			w.git(t, "config", "core.hooksPath", hooksPath)
			marker := filepath.Join(w.home, "pwned")
			r := w.sbx(t, w.code, "exec", "--", "mkdir -p "+hooksPath+" && printf '#!/bin/sh\\ntouch "+marker+"\\n' > "+hooksPath+"/pre-commit && chmod +x "+hooksPath+"/pre-commit")
			if r.code != 0 {
				t.Fatalf("exec: %d %q", r.code, r.stderr)
			}
			absent(t, filepath.Join(w.code, hooksPath, "pre-commit"), "the planted hook")
			if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, hooksPath, "pre-commit")) {
				t.Fatalf("quarantine not reported: %q", r.stderr)
			}
			w.git(t, "commit", "-q", "--allow-empty", "-m", "two")
			absent(t, marker, "the hook ran at git commit")
			if r := w.sbx(t, w.code, "accept"); !strings.Contains(r.stdout, filepath.Join(w.code, hooksPath, "pre-commit")) {
				t.Fatalf("sbx accept does not list the hook: %q %q", r.stdout, r.stderr)
			}
		})
	}
}

// TestPlantedRebaseExec: a rebase stopped in the sandbox with an exec line
// added to its todo list does not reach the host: the user's git rebase
// --continue finds no rebase, and runs nothing.
func TestPlantedRebaseExec(t *testing.T) {
	w := gitWorld(t)
	os.WriteFile(filepath.Join(w.code, "b"), []byte("b\n"), 0o644)
	w.git(t, "add", "b")
	w.git(t, "commit", "-q", "-m", "two")
	marker := filepath.Join(w.home, "pwned")
	r := w.sbx(t, w.code, "exec", "--",
		"export GIT_AUTHOR_NAME=u GIT_AUTHOR_EMAIL=u@e GIT_COMMITTER_NAME=u GIT_COMMITTER_EMAIL=u@e; "+
			"GIT_SEQUENCE_EDITOR=\"sed -i '1i break'\" git rebase -q -i HEAD~1 && echo 'exec touch "+marker+"' >> .git/rebase-merge/git-rebase-todo && test -d .git/rebase-merge")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	absent(t, filepath.Join(w.code, ".git/rebase-merge"), "the sandbox's rebase state")
	if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, ".git/rebase-merge/git-rebase-todo")) {
		t.Fatalf("quarantine not reported: %q", r.stderr)
	}
	cmd := exec.Command("git", "rebase", "--continue")
	cmd.Dir, cmd.Env = w.code, append(append([]string{}, w.env...), "GIT_EDITOR=true")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("git rebase --continue found a rebase on the host: %s", out)
	}
	absent(t, marker, "the exec line ran at git rebase --continue")
}

// TestPlantedProtectedNames: protected names at any depth and in any case,
// and .git in other spellings, never land on the host.
func TestPlantedProtectedNames(t *testing.T) {
	w := newWorld(t)
	quarantined := []string{"pkg/.claude/settings.json", "sub/.envrc", "pkg/.mcp.json", ".CLAUDE/settings.json",
		".pre-commit-config.yaml", "lefthook.yml", ".gemini/settings.json", ".windsurf/mcp.json", ".zed/tasks.json",
		"web/.npmrc", ".yarnrc.yml", "sub/.Envrc"}
	refused := []string{".GIT/hooks/x", ".Git/config", "sub/.GIT/config"}
	plantAll(t, w, quarantined, refused)
}

// plantAll writes every file of quarantined and refused from one sandboxed
// command, and checks that none reached the host: the first kind reported
// as quarantined, the second as not brought back.
func plantAll(t *testing.T, w *world, quarantined, refused []string) {
	t.Helper()
	var script []string
	for _, f := range append(append([]string{}, quarantined...), refused...) {
		script = append(script, "mkdir -p '"+filepath.Dir(f)+"' && echo planted > '"+f+"'")
	}
	r := w.sbx(t, w.code, "exec", "--", strings.Join(script, " && "))
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	for _, f := range quarantined {
		absent(t, filepath.Join(w.code, f), "a protected file")
		if !strings.Contains(r.stderr, "quarantined: "+filepath.Join(w.code, f)) {
			t.Errorf("%s: quarantine not reported: %q", f, r.stderr)
		}
	}
	for _, f := range refused {
		absent(t, filepath.Join(w.code, f), "a .git spelling")
		if !strings.Contains(r.stderr, "not brought back: "+filepath.Join(w.code, f)) {
			t.Errorf("%s: refusal not reported: %q", f, r.stderr)
		}
	}
}

// TestPlantedLinkThroughOwnLink: a symlink whose target leaves the code dir
// through another link of the tree stays in the sandbox.
func TestPlantedLinkThroughOwnLink(t *testing.T) {
	w := newWorld(t)
	os.Symlink(w.home, filepath.Join(w.code, "myhome")) // the user's own link
	r := w.sbx(t, w.code, "exec", "--", "ln -s . U && ln -s U/U/U/U/../../../../outside/secret keylink && ln -s myhome/.ssh/id_ed25519 key2 && ln -s z/z/z/z/../../../../etc/shadow a && ln -s . z")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	for _, l := range []string{"keylink", "key2", "a"} {
		absent(t, filepath.Join(w.code, l), "a link leaving the code dir")
		if !strings.Contains(r.stderr, "not brought back: "+filepath.Join(w.code, l)) {
			t.Errorf("%s: refusal not reported: %q", l, r.stderr)
		}
	}
	if fi, err := os.Lstat(filepath.Join(w.code, "U")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the harmless link U did not come back: %v", err)
	}
}

// TestSandboxNamesPrintedEscaped: a file name with terminal escape sequences
// reaches the user's terminal escaped, in the "not brought back" and the
// "quarantined" lines and in sbx accept's listing.
func TestSandboxNamesPrintedEscaped(t *testing.T) {
	w := newWorld(t)
	r := w.sbx(t, w.code, "exec", "--", `mkdir -p .claude .git/hooks && touch ".claude/$(printf 'a\033]52;c;ZXZpbA==\007b')" ".git/hooks/$(printf 'c\033[2Jd')"`)
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	if strings.ContainsAny(r.stderr, "\x1b\x07") {
		t.Fatalf("raw escape sequence on the terminal: %q", r.stderr)
	}
	for _, want := range []string{`quarantined: "` + w.code + `/.claude/a\x1b]52;c;ZXZpbA==\ab"`, `not brought back: "` + w.code + `/.git/hooks/c\x1b[2Jd"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("missing %s in %q", want, r.stderr)
		}
	}
	r = w.sbx(t, w.code, "accept")
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") || !strings.Contains(r.stdout, `a\x1b]52;c;ZXZpbA==\ab`) {
		t.Fatalf("sbx accept: %q %q", r.stdout, r.stderr)
	}
}

// TestHostCommandPathArguments: a listed non-git host command whose
// argument names a file outside the code dirs runs in the sandbox (where it
// is a stub), not on the host. A fake gh on the host's PATH records whether
// it ran.
func TestHostCommandPathArguments(t *testing.T) {
	w := newWorld(t)
	bin := tempDir(t)
	ran := filepath.Join(w.home, "gh-ran")
	os.WriteFile(filepath.Join(bin, "gh"), []byte("#!/bin/sh\necho \"$@\" >> "+ran+"\n"), 0o755)
	os.Chmod(bin, 0o755)
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH")}
	os.WriteFile(filepath.Join(w.code, "notes.md"), []byte("body\n"), 0o644)
	r := w.sbxEnv(t, w.code, env, "exec", "--host-command", "gh pr create", "--", "gh pr create --body-file notes.md")
	if r.code != 0 {
		t.Fatalf("control: a file in the code dir: %d %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(ran); !strings.Contains(string(b), "notes.md") {
		t.Fatalf("control: the host gh did not run: %q", b)
	}
	os.Remove(ran)
	for _, arg := range []string{"--body-file /etc/passwd", "--body-file=/etc/passwd", "-F/etc/passwd", "--body-file ../../etc/passwd",
		"-F @/etc/passwd", "--body-file ~/.ssh/id_ed25519", "--body-file .git/config"} {
		r := w.sbxEnv(t, w.code, env, "exec", "--host-command", "gh pr create", "--", "gh pr create "+arg)
		if r.code != 97 {
			t.Errorf("%s: exit %d, want the sandbox stub's 97: %q", arg, r.code, r.stderr)
		}
		if _, err := os.Stat(ran); err == nil {
			b, _ := os.ReadFile(ran)
			t.Fatalf("%s: gh ran on the host with %q", arg, b)
		}
	}
}

// TestPlantedCommitAndHostPullRebase pins down what the quarantine holds
// against commits (docs/security.md, "What really holds"): a commit made in
// the sandbox that adds a protected file comes back as objects, refs and
// index, and the work tree lacks the file. A routed host git pull --rebase
// then refuses (the missing file is an unstaged change); with --autostash it
// rebases, writing the file, and the stash's pop takes it away again; the
// result names the protected file the host command touched.
func TestPlantedCommitAndHostPullRebase(t *testing.T) {
	w := gitWorld(t)
	url, _ := gittest.HTTPRemote(t, tempDir(t), w.home)
	w.git(t, "remote", "add", "origin", url)
	w.git(t, "push", "-q", "-u", "origin", "main")
	other := filepath.Join(tempDir(t), "other")
	w.git(t, "clone", "-q", url, other)
	os.WriteFile(filepath.Join(other, "up.txt"), []byte("upstream\n"), 0o644)
	w.git(t, "-C", other, "add", "up.txt")
	w.git(t, "-C", other, "commit", "-q", "-m", "upstream")
	w.git(t, "-C", other, "push", "-q", "origin", "main")
	ident := []string{"GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@example.com", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@example.com"}
	planted := filepath.Join(w.code, ".claude/settings.json")
	r := w.sbxEnv(t, w.code, ident, "exec", "--", "export GIT_AUTHOR_NAME=u GIT_AUTHOR_EMAIL=u@e GIT_COMMITTER_NAME=u GIT_COMMITTER_EMAIL=u@e; "+
		"mkdir -p .claude && echo '{\"hooks\":1}' > .claude/settings.json && git add .claude && git commit -q -m planted")
	if r.code != 0 || !strings.Contains(r.stderr, "quarantined: "+planted) {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	absent(t, planted, "the planted file before the pull")
	if !strings.Contains(w.git(t, "log", "--stat", "-1"), ".claude/settings.json") {
		t.Fatal("the sandbox's commit did not come back")
	}
	r = w.sbxEnv(t, w.code, ident, "exec", "--", "git pull --rebase origin main")
	if r.code == 0 || !strings.Contains(r.stderr, "unstaged changes") {
		t.Fatalf("routed git pull --rebase: %d %q", r.code, r.stderr)
	}
	absent(t, planted, "the planted file after a refused pull --rebase")
	r = w.sbxEnv(t, w.code, ident, "exec", "--", "git pull --rebase --autostash origin main")
	if r.code != 0 {
		t.Fatalf("routed git pull --rebase --autostash: %d %q", r.code, r.stderr)
	}
	absent(t, planted, "the planted file after pull --rebase --autostash")
	if !strings.Contains(w.git(t, "log", "--format=%s", "-2"), "planted\nupstream") {
		t.Fatalf("the rebase did not replay the sandbox's commit: %s", w.git(t, "log", "--oneline", "-3"))
	}
}

// TestUndoAndHeldDeletionsPrintedEscaped: the lines of sbx undo and of
// sbx accept --deletions name files the sandbox chose, escaped like every
// other sync line.
func TestUndoAndHeldDeletionsPrintedEscaped(t *testing.T) {
	w := newWorld(t)
	evil := `$(printf 'p\033]52;c;SGVsbG8=\007\033[2Jq')`
	r := w.sbx(t, w.code, "exec", "--", `echo x > "`+evil+`"`)
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	r = w.sbx(t, w.code, "undo")
	if r.code != 0 || strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") || !strings.Contains(r.stdout, `p\x1b]52;c;SGVsbG8=\a\x1b[2Jq`) {
		t.Fatalf("sbx undo: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// Thirty host files whose names carry escapes, all deleted by the
	// sandbox: held, then listed and accepted.
	for i := 0; i < 30; i++ {
		os.WriteFile(filepath.Join(w.code, fmt.Sprintf("m%d\x1b[2J", i)), []byte("x\n"), 0o644)
	}
	r = w.sbx(t, w.code, "exec", "--keep", "--", `rm -f m*`)
	if r.code != 0 || strings.ContainsAny(r.stderr, "\x1b\x07") || !strings.Contains(r.stderr, "held") {
		t.Fatalf("exec rm: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"accept"}, {"accept", "--deletions"}} {
		r = w.sbx(t, w.code, args...)
		if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") || !strings.Contains(r.stdout, `m7\x1b[2J`) {
			t.Fatalf("sbx %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}
