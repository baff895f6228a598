package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Nothing is lost: each test runs a real sandboxed command through the real
// sbx binary, with the host changing the tree while the command runs where
// that is the case, and checks that no version of a file is gone.

// workspace is the host side of a session's sandbox copy of the code dir
// (the local backend bind-mounts it): the test writes a go-ahead file there
// for a command that waits for the host's edits.
func (w *world) workspace(session string) string {
	return filepath.Join(workRoot(filepath.Join(w.state, "sbx", "sessions", session)), "0")
}

// workRoot is where a session's workspaces are: in memory when its state
// dir's workroot file names the place (a small tree's, workspace = "auto"),
// else in the state dir.
func workRoot(stateDir string) string {
	if b, err := os.ReadFile(filepath.Join(stateDir, "workroot")); err == nil {
		return strings.TrimSpace(string(b))
	}
	return filepath.Join(stateDir, "work")
}

// waitCmd makes a command that runs before, prints "ready", waits (in the
// sandbox, with a deadline) for the test's go-ahead, then runs after.
func waitCmd(before, after string) string {
	return before + "; echo ready; i=0; while [ ! -e .sbx/go ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; " + after
}

// during runs sbx exec with command (from waitCmd) and calls hostEdit when
// the command is ready, then lets it end.
func (w *world) during(t *testing.T, session string, args []string, command string, hostEdit func()) result {
	t.Helper()
	cmd := exec.Command(sbxBin, append(append([]string{"exec", "--session", session}, args...), "--", command)...)
	cmd.Dir, cmd.Env = w.code, w.env
	pr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(pr)
	var out strings.Builder
	for {
		line, err := rd.ReadString('\n')
		out.WriteString(line)
		if line == "ready\n" {
			break
		}
		if err != nil {
			cmd.Wait()
			t.Fatalf("the command never got ready: %q %q", out.String(), stderr.String())
		}
	}
	hostEdit()
	os.MkdirAll(filepath.Join(w.workspace(session), ".sbx"), 0o777)
	if err := os.WriteFile(filepath.Join(w.workspace(session), ".sbx", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, _ := readAll(rd)
	out.WriteString(rest)
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), stderr.String(), code}
}

func readAll(rd *bufio.Reader) (string, error) {
	var b strings.Builder
	_, err := rd.WriteTo(&b)
	return b.String(), err
}

func (w *world) put(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(w.code, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (w *world) get(rel string) string {
	b, err := os.ReadFile(filepath.Join(w.code, rel))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func (w *world) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(w.code, rel))
	return err == nil
}

// The sandbox deletes a directory while the host edits and adds files in
// it: the host's files stay, the unchanged ones go, and it is reported.
func TestSandboxRemovesDirWhileHostEditsIt(t *testing.T) {
	w := newWorld(t)
	w.put(t, "d/edited", "old\n")
	w.put(t, "d/same", "same\n")
	w.put(t, "d/gone", "gone\n")
	w.put(t, "d/sub/deep", "deep\n")
	r := w.during(t, "k", []string{"--keep"}, waitCmd("rm -rf d", "true"), func() {
		w.put(t, "d/edited", "host's edit\n")
		w.put(t, "d/added", "host's new file\n")
		os.Remove(filepath.Join(w.code, "d/gone"))
		w.put(t, "d/also", "added after a deletion\n")
	})
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if w.get("d/edited") != "host's edit\n" || w.get("d/added") != "host's new file\n" || w.get("d/also") != "added after a deletion\n" {
		t.Fatalf("the host's changes were removed: edited %q added %q also %q", w.get("d/edited"), w.get("d/added"), w.get("d/also"))
	}
	if w.exists("d/same") || w.exists("d/sub") || w.exists("d/gone") {
		t.Fatalf("what the host did not change should be gone: same %v sub %v", w.exists("d/same"), w.exists("d/sub"))
	}
	if !strings.Contains(r.stderr, "sbx: conflict: "+filepath.Join(w.code, "d")+": removed in the sandbox, but the host changed or added 3 paths") {
		t.Fatalf("not reported: %q", r.stderr)
	}
	// The next command sees the host's files again.
	r = w.sbx(t, w.code, "exec", "--session", "k", "--", "cat d/edited d/added")
	if r.code != 0 || r.stdout != "host's edit\nhost's new file\n" {
		t.Fatalf("next command: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// What went is in the journal.
	if r := w.sbx(t, w.code, "undo", "--session", "k", filepath.Join(w.code, "d/same")); r.code != 0 || w.get("d/same") != "same\n" {
		t.Fatalf("undo d/same: %d %q %q, now %q", r.code, r.stdout, r.stderr, w.get("d/same"))
	}
}

// The host deletes a directory the sandbox writes into: the command's
// changes come back (beside, as conflict copies, where the host deleted a
// file) and the session is not wedged.
func TestHostRemovesDirTheSandboxWritesInto(t *testing.T) {
	w := newWorld(t)
	w.put(t, "d/a", "a\n")
	w.put(t, "d/b", "b\n")
	r := w.during(t, "k", []string{"--keep"}, waitCmd("true", "echo sandbox > d/a; mkdir -p d/new && echo made > d/new/f"), func() {
		if err := os.RemoveAll(filepath.Join(w.code, "d")); err != nil {
			t.Fatal(err)
		}
	})
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if w.get("d/a.sbx-conflict") != "sandbox\n" || w.get("d/new/f") != "made\n" {
		t.Fatalf("the sandbox's changes did not come back: %q %q", w.get("d/a.sbx-conflict"), w.get("d/new/f"))
	}
	if w.exists("d/a") || w.exists("d/b") {
		t.Fatal("the host's deletion was undone")
	}
	if !strings.Contains(r.stderr, "removed on the host while the sandbox changed files in it") {
		t.Fatalf("not reported: %q", r.stderr)
	}
	for i := 0; i < 2; i++ {
		if r := w.sbx(t, w.code, "exec", "--session", "k", "--", "ls d"); r.code != 0 || strings.Contains(r.stderr, "sync failed") {
			t.Fatalf("command %d after: %d %q", i, r.code, r.stderr)
		}
	}
}

// File/directory conflicts both ways: the host's side stays, the sandbox's
// is beside it, later commands run, and release keeps the sandbox's work.
func TestTypeConflictsDoNotWedge(t *testing.T) {
	w := newWorld(t)
	w.put(t, "p", "file p\n")
	w.put(t, "q/x", "x\n")
	r := w.during(t, "k", []string{"--keep"},
		waitCmd("true", "rm p && mkdir p && echo 'in dir p' > p/inner; echo 'sandbox y' > q/y"), func() {
			w.put(t, "p", "host's edit of p\n")
			os.RemoveAll(filepath.Join(w.code, "q"))
			w.put(t, "q", "host made q a file\n")
		})
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if w.get("p") != "host's edit of p\n" || w.get("p.sbx-conflict/inner") != "in dir p\n" {
		t.Fatalf("p: %q, p.sbx-conflict/inner %q", w.get("p"), w.get("p.sbx-conflict/inner"))
	}
	if w.get("q") != "host made q a file\n" || w.get("q.sbx-conflict/y") != "sandbox y\n" {
		t.Fatalf("q: %q, q.sbx-conflict/y %q", w.get("q"), w.get("q.sbx-conflict/y"))
	}
	r = w.sbx(t, w.code, "exec", "--session", "k", "--", "cat p q; echo later > later.txt")
	if r.code != 0 || r.stdout != "host's edit of p\nhost made q a file\n" {
		t.Fatalf("next command: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.sbx(t, w.code, "release", "--session", "k"); r.code != 0 {
		t.Fatalf("release: %d %q", r.code, r.stderr)
	}
	if w.get("later.txt") != "later\n" {
		t.Fatalf("later.txt: %q", w.get("later.txt"))
	}
}

// Release first tries to bring back what the sandbox holds that the host
// does not (here: a pull-back refused for the disk limit); what cannot come
// back is named, not dropped in silence.
func TestReleaseSaysWhatIsLost(t *testing.T) {
	w := newWorld(t)
	env := []string{"SBX_DISK=1MiB"}
	r := w.sbxEnv(t, w.code, env, "exec", "--keep", "--session", "k", "--", "head -c 700000 /dev/zero > big1; head -c 700000 /dev/zero > big2; echo small > small.txt")
	if w.exists("small.txt") {
		t.Fatalf("the pull-back was not refused for the disk limit: %d %q", r.code, r.stderr)
	}
	r = w.sbxEnv(t, w.code, env, "release", "--session", "k")
	if r.code != 0 {
		t.Fatalf("release: %d %q", r.code, r.stderr)
	}
	// "lost with the sandbox: PATHS", or "N changes, among them PATHS" when
	// the helper finished writing the refused pull (it may: the host drains
	// it) and so counted what it sent.
	lost := regexp.MustCompile(`lost with the sandbox: (\d+ changes, among them )?` + regexp.QuoteMeta(filepath.Join(w.code, "big1")))
	if !strings.Contains(r.stderr, "the last pull-back before the release failed") || !lost.MatchString(r.stderr) {
		t.Fatalf("release does not say what is lost with the sandbox (big1):\n%s", r.stderr)
	}
}

// Every host file a pull-back overwrites or deletes is in the journal;
// sbx undo puts the last command's changes back, and never loses a version
// the host made since.
func TestJournalAndUndo(t *testing.T) {
	w := newWorld(t)
	w.put(t, "other", "other\n")
	w.put(t, "mine", "v1\n")
	var before syscall.Stat_t
	syscall.Stat(filepath.Join(w.code, "README"), &before)
	r := w.sbx(t, w.code, "exec", "--", "echo changed > README; rm other; echo new > made; echo v2 > mine")
	if r.code != 0 || w.get("README") != "changed\n" || w.exists("other") {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	// The journal keeps README's old inode (a hard link), not a copy.
	found := false
	filepath.Walk(filepath.Join(w.state, "sbx", "journal"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Sys().(*syscall.Stat_t).Ino == before.Ino {
			found = true
		}
		return nil
	})
	if !found {
		t.Error("the journal does not hold README's old inode (no hard link)")
	}
	// The user edits a file after the command.
	w.put(t, "mine", "the user's v3\n")
	r = w.sbx(t, w.code, "undo")
	if r.code != 0 {
		t.Fatalf("undo: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if w.get("README") != "hello\n" || w.get("other") != "other\n" || w.exists("made") || w.get("mine") != "v1\n" {
		t.Fatalf("after undo: README %q other %q made %v mine %q", w.get("README"), w.get("other"), w.exists("made"), w.get("mine"))
	}
	for _, want := range []string{"restored " + filepath.Join(w.code, "README"), "removed " + filepath.Join(w.code, "made"), "kept " + filepath.Join(w.code, "mine") + ": it had changed since"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("undo does not say %q:\n%s", want, r.stdout)
		}
	}
	// The user's version is not lost: undo of the path brings it back.
	if r := w.sbx(t, w.code, "undo", "mine"); r.code != 0 || w.get("mine") != "the user's v3\n" {
		t.Fatalf("undo mine: %d %q %q, mine %q", r.code, r.stdout, r.stderr, w.get("mine"))
	}
	// Nothing left to undo.
	if r := w.sbx(t, w.code, "undo"); r.code != 125 || !strings.Contains(r.stderr, "no command's changes") {
		t.Fatalf("second undo: %d %q", r.code, r.stderr)
	}
}

// The journal's cap: the newest round is kept whole, so a file bigger than
// journal_size is kept (sbx undo of that command restores it); the next
// pull-back that keeps something drops that round to stay under the cap,
// and says so.
func TestJournalCap(t *testing.T) {
	w := newWorld(t)
	env := []string{"SBX_JOURNAL_SIZE=1KiB"}
	w.put(t, "big", strings.Repeat("x", 4096))
	w.put(t, "other", "other\n")
	r := w.sbxEnv(t, w.code, env, "exec", "--keep", "--session", "k", "--", "echo small > big")
	if r.code != 0 || strings.Contains(r.stderr, "sbx: journal:") {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	r = w.sbxEnv(t, w.code, env, "exec", "--keep", "--session", "k", "--", "echo changed > other")
	if r.code != 0 || !strings.Contains(r.stderr, "sbx: journal: the journal dropped the pull-back of") || !strings.Contains(r.stderr, "(1 file kept)") {
		t.Fatalf("the dropped round is not said: %d %q", r.code, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, env, "undo", "--session", "k"); r.code != 0 || w.get("other") != "other\n" {
		t.Fatalf("undo of the last command: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, env, "undo", "--session", "k", filepath.Join(w.code, "big")); r.code != 125 || !strings.Contains(r.stderr, "not in the journal") {
		t.Fatalf("undo of a dropped file: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestJournalKeepsAFileOverTheCap: the last command's round is whole.
func TestJournalKeepsAFileOverTheCap(t *testing.T) {
	w := newWorld(t)
	env := []string{"SBX_JOURNAL_SIZE=1KiB"}
	w.put(t, "big", strings.Repeat("x", 4096))
	if r := w.sbxEnv(t, w.code, env, "exec", "--", "echo small > big"); r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	if r := w.sbxEnv(t, w.code, env, "undo"); r.code != 0 || w.get("big") != strings.Repeat("x", 4096) {
		t.Fatalf("undo of a file over the cap: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func (w *world) tree(t *testing.T, n int) {
	for i := 0; i < n; i++ {
		w.put(t, fmt.Sprintf("src/f%02d.go", i), fmt.Sprintf("package f // %d\n", i))
	}
}

// rm -rf . in the sandbox: nothing is deleted on the host until the user
// accepts; later commands run and do not get the files back; accepting
// deletes (into the journal), rejecting puts them back into the sandbox.
func TestMassDeletionHeld(t *testing.T) {
	w := newWorld(t)
	w.tree(t, 30)
	r := w.sbx(t, w.code, "exec", "--keep", "--session", "k", "--", "rm -rf ./* && echo new > new.txt")
	if r.code != 0 {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	if !w.exists("src/f00.go") || !w.exists("README") || w.get("new.txt") != "new\n" {
		t.Fatalf("held deletion applied, or the rest not: src %v README %v new %q", w.exists("src/f00.go"), w.exists("README"), w.get("new.txt"))
	}
	for _, want := range []string{"sbx: held: the command's deletions were not applied to the host, because " + w.code + ": it deletes all 31 files of the code dir",
		"sbx: held:   " + filepath.Join(w.code, "src"), "sbx accept --deletions --session k", "--reject-deletions --session k"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	// A later command runs; the files are not pushed back; it is reminded.
	r = w.sbx(t, w.code, "exec", "--session", "k", "--", "ls; echo more > more.txt")
	if r.code != 0 || strings.Contains(r.stdout, "src") || !strings.Contains(r.stderr, "deletions of an earlier command still wait") {
		t.Fatalf("later command: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if w.get("more.txt") != "more\n" || !w.exists("src/f29.go") {
		t.Fatal("the later command's work or the held files are gone")
	}
	if r := w.sbx(t, w.code, "accept", "--session", "k"); !strings.Contains(r.stdout, filepath.Join(w.code, "src/f07.go")+" (deleted in session k, held") {
		t.Fatalf("accept list: %q %q", r.stdout, r.stderr)
	}
	w.put(t, "src/f03.go", "the user's edit\n")
	r = w.sbx(t, w.code, "accept", "--deletions", "--session", "k")
	if r.code != 0 || w.exists("src/f00.go") || w.exists("README") {
		t.Fatalf("accept --deletions: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if w.get("src/f03.go") != "the user's edit\n" || !strings.Contains(r.stdout, "kept "+filepath.Join(w.code, "src/f03.go")) {
		t.Fatalf("accept deleted a file changed since: %q %q", w.get("src/f03.go"), r.stdout)
	}
	if r := w.sbx(t, w.code, "exec", "--session", "k", "--", "ls src"); r.code != 0 || r.stdout != "f03.go\n" {
		t.Fatalf("after accept: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// The deleted files are in the journal.
	if r := w.sbx(t, w.code, "undo", "--session", "k", filepath.Join(w.code, "src/f00.go")); r.code != 0 || !w.exists("src/f00.go") {
		t.Fatalf("undo after accept: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestMassDeletionRejected(t *testing.T) {
	w := newWorld(t)
	w.tree(t, 30)
	if r := w.sbx(t, w.code, "exec", "--keep", "--session", "k", "--", "rm -rf src"); r.code != 0 || !strings.Contains(r.stderr, "held") {
		t.Fatalf("exec: %d %q", r.code, r.stderr)
	}
	r := w.sbx(t, w.code, "accept", "--reject-deletions", "--session", "k")
	if r.code != 0 || !strings.Contains(r.stdout, "dropped 1 held deletions") {
		t.Fatalf("reject: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.sbx(t, w.code, "exec", "--session", "k", "--", "ls src | wc -l"); r.code != 0 || strings.TrimSpace(r.stdout) != "30" {
		t.Fatalf("after reject the files are not back in the sandbox: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if !w.exists("src/f12.go") {
		t.Fatal("reject lost a host file")
	}
}

// git's core is held too, even when it is a small part of the tree.
func TestGitCoreDeletionHeld(t *testing.T) {
	w := newWorld(t)
	w.tree(t, 30)
	w.put(t, ".git/HEAD", "ref: refs/heads/main\n")
	w.put(t, ".git/objects/ab/cdef", "blob")
	w.put(t, ".git/refs/heads/main", "0123\n")
	for _, c := range []struct{ cmd, want string }{
		{"rm .git/HEAD", "it deletes git's .git/HEAD"},
		{"rm -rf .git/objects/*", "it deletes all 1 of git's objects and packs (.git/objects)"},
		{"rm -rf .git/refs", "it deletes git's .git/refs"},
	} {
		r := w.sbx(t, w.code, "exec", "--", c.cmd)
		if r.code != 0 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("%s: %d %q, want %q", c.cmd, r.code, r.stderr, c.want)
		}
	}
	if !w.exists(".git/HEAD") || !w.exists(".git/objects/ab/cdef") || !w.exists(".git/refs/heads/main") {
		t.Fatal("git's core was deleted on the host")
	}
}
