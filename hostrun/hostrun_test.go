package hostrun

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/router"
)

// fixture is a code dir holding a git repository whose origin is a bare
// repository served over smart HTTP by git-http-backend (local transports
// are disabled on the host, see GitConfig).
type fixture struct {
	base, code, home, remote string
	url                      string // the origin URL
	gitPath                  string
	prefixes                 [][]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("hostrun tests need git (apt-get install git)")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		base: base, code: filepath.Join(base, "code"), home: filepath.Join(base, "home"),
		remote: filepath.Join(base, "remotes", "remote.git"), gitPath: gitPath,
	}
	if err := os.MkdirAll(f.home, 0o755); err != nil {
		t.Fatal(err)
	}
	// The host environment the runner inherits: an empty global config and
	// an identity for the setup commits.
	t.Setenv("HOME", f.home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(f.home, ".config"))
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(k, "sbx test")
	}
	for _, k := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(k, "test@example.com")
	}

	f.git(t, base, "init", "-q", "-b", "main", f.code)
	writeFile(t, filepath.Join(f.code, "README"), "hello\n", 0o644)
	f.git(t, f.code, "add", "README")
	f.git(t, f.code, "commit", "-q", "-m", "first")
	f.git(t, base, "init", "-q", "--bare", "-b", "main", f.remote)
	f.git(t, f.remote, "config", "http.receivepack", "true")

	out, err := exec.Command(gitPath, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(f.remote), "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + f.home,
		},
	})
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/remote.git"
	f.git(t, f.code, "remote", "add", "origin", f.url)

	f.prefixes, err = router.ParsePrefixes(router.DefaultHostCommands)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// git runs a setup command directly (not through hostrun).
func (f *fixture) git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(f.gitPath, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// route decides command in cwd and requires a host decision.
func (f *fixture) route(t *testing.T, command, cwd string) *router.Plan {
	t.Helper()
	d := router.Decide(command, cwd, []string{f.code}, f.prefixes)
	if d.Where != router.Host {
		t.Fatalf("Decide(%q) = %s", command, d.Reason)
	}
	return d.Plan
}

type result struct {
	status         int
	err            error
	stdout, stderr string
}

func (f *fixture) run(t *testing.T, p *router.Plan) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	status, err := Run(ctx, p, []string{f.code}, &out, &errb)
	return result{status, err, out.String(), errb.String()}
}

func (f *fixture) remoteRef(t *testing.T, ref string) string {
	t.Helper()
	cmd := exec.Command(f.gitPath, "--git-dir", f.remote, "rev-parse", "--verify", "-q", ref)
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// (a) A hook the sandbox wrote, wired in through the repository's config,
// does not run on a host git push; the push itself succeeds.
func TestHuskyPrePushDoesNotRun(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.base, "husky-ran")
	writeFile(t, filepath.Join(f.code, ".husky", "pre-push"), "#!/bin/sh\ntouch '"+marker+"'\n", 0o755)
	f.git(t, f.code, "config", "core.hooksPath", ".husky")

	// Control: a plain git push does run it.
	f.git(t, f.code, "push", "-q", "origin", "HEAD:refs/heads/control")
	if !exists(marker) {
		t.Fatal("control: the pre-push hook did not run on a plain git push; the test proves nothing")
	}
	os.Remove(marker)

	r := f.run(t, f.route(t, "git push origin main", f.code))
	if r.err != nil || r.status != 0 {
		t.Fatalf("host git push: status %d err %v stderr %s", r.status, r.err, r.stderr)
	}
	if exists(marker) {
		t.Fatal("the sandbox-written pre-push hook ran on the host")
	}
	if got, want := f.remoteRef(t, "refs/heads/main"), f.git(t, f.code, "rev-parse", "HEAD"); got != want {
		t.Fatalf("remote main = %q; want %q", got, want)
	}
}

// (b) A planted nested repository whose config would run a program is
// refused by the repository check, and its program never runs.
func TestNestedRepositoryRefused(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.base, "ssh-ran")
	sub := filepath.Join(f.code, "sub")
	f.git(t, f.base, "init", "-q", sub)
	f.git(t, sub, "config", "core.sshCommand", "sh -c 'touch \""+marker+"\"' ssh")
	f.git(t, sub, "remote", "add", "origin", "ssh://example.invalid/x.git")

	// Control: plain git in sub runs the planted ssh command.
	exec.Command(f.gitPath, "-C", sub, "ls-remote", "origin").Run()
	if !exists(marker) {
		t.Fatal("control: core.sshCommand did not run; the test proves nothing")
	}
	os.Remove(marker)

	if d := router.Decide("git push", sub, []string{f.code}, f.prefixes); d.Where != router.Sandbox || !strings.Contains(d.Reason, "own .git") {
		t.Errorf("router: %+v", d)
	}
	// The runner refuses on its own, whatever the router said.
	for _, words := range [][]string{{"git", "push"}, {"git", "ls-remote", "origin"}} {
		p := &router.Plan{Dir: sub, Steps: []router.Step{{Pipeline: []router.Cmd{{
			Kind: router.KindHost, Words: words, Args: words, Dir: sub,
			Stdout: router.StreamStdout, Stderr: router.StreamStderr, Prefix: "git " + words[1], RepoCheck: true,
		}}}}}
		r := f.run(t, p)
		var re *RefusedError
		if !errors.As(r.err, &re) || !errors.Is(r.err, ErrForeignRepository) {
			t.Fatalf("%q in a nested repository: status %d err %v", words, r.status, r.err)
		}
		if !strings.Contains(r.err.Error(), "sub/.git") {
			t.Errorf("error %q does not name the foreign repository", r.err)
		}
	}
	if exists(marker) {
		t.Fatal("the planted core.sshCommand ran on the host")
	}

	// A gitfile pointing at a repository outside the code dir is refused too.
	other := filepath.Join(f.base, "other")
	f.git(t, f.base, "init", "-q", other)
	gf := filepath.Join(f.code, "gf")
	writeFile(t, filepath.Join(gf, ".git"), "gitdir: "+filepath.Join(other, ".git")+"\n", 0o644)
	p := &router.Plan{Dir: gf, Steps: []router.Step{{Pipeline: []router.Cmd{{
		Kind: router.KindHost, Words: []string{"git", "fetch"}, Args: []string{"git", "fetch"}, Dir: gf,
		Stdout: router.StreamStdout, Stderr: router.StreamStderr, Prefix: "git fetch", RepoCheck: true,
	}}}}}
	if r := f.run(t, p); !errors.Is(r.err, ErrForeignRepository) {
		t.Fatalf("gitfile to another repository: %+v", r)
	}
}

// (c) "$VAR" never reaches the host expanded: quoted literally it reaches git
// as is; unquoted or double-quoted it goes to the sandbox.
func TestVariablesStayLiteral(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, f.route(t, `git push origin 'HEAD:refs/heads/$HOME'`, f.code))
	if r.err != nil || r.status != 0 {
		t.Fatalf("push: %+v", r)
	}
	if f.remoteRef(t, "refs/heads/$HOME") == "" {
		t.Fatal("the remote has no branch named literally $HOME")
	}
	for _, cmd := range []string{`git push origin "$HOME"`, `git push origin $HOME`, `git push origin ${HOME}`, `git push origin ~`} {
		if d := router.Decide(cmd, f.code, []string{f.code}, f.prefixes); d.Where != router.Sandbox {
			t.Errorf("Decide(%q) = %s", cmd, d.Reason)
		}
	}
}

// (d) Variables that redirect git in the host environment do not reach it.
func TestRedirectingEnvironmentRemoved(t *testing.T) {
	f := newFixture(t)
	other := filepath.Join(f.base, "other")
	f.git(t, f.base, "init", "-q", "-b", "main", other)
	writeFile(t, filepath.Join(other, "x"), "other\n", 0o644)
	f.git(t, other, "add", "x")
	f.git(t, other, "commit", "-q", "-m", "other")
	marker := filepath.Join(f.base, "env-hook-ran")
	hooks := filepath.Join(f.base, "hooks")
	writeFile(t, filepath.Join(hooks, "pre-push"), "#!/bin/sh\ntouch '"+marker+"'\n", 0o755)

	for k, v := range map[string]string{
		"GIT_DIR":               filepath.Join(other, ".git"),
		"GIT_WORK_TREE":         other,
		"GIT_INDEX_FILE":        filepath.Join(other, ".git", "index"),
		"GIT_OBJECT_DIRECTORY":  filepath.Join(other, ".git", "objects"),
		"GIT_EXEC_PATH":         "/nonexistent",
		"GIT_CONFIG_COUNT":      "2",
		"GIT_CONFIG_KEY_0":      "url.http://127.0.0.1:1/.insteadOf",
		"GIT_CONFIG_VALUE_0":    f.url,
		"GIT_CONFIG_KEY_1":      "core.hooksPath",
		"GIT_CONFIG_VALUE_1":    hooks,
		"GIT_CONFIG_PARAMETERS": "'core.hookspath'='" + hooks + "'",
		"GIT_TEMPLATE_DIR":      hooks,
		"GIT_ALLOW_PROTOCOL":    "file",
		"GIT_TERMINAL_PROMPT":   "1",
		"POSIXLY_CORRECT":       "1",
	} {
		t.Setenv(k, v)
	}
	r := f.run(t, f.route(t, "git push origin HEAD:refs/heads/d", f.code))
	if r.err != nil || r.status != 0 {
		t.Fatalf("push: %+v", r)
	}
	want := exec.Command(f.gitPath, "-C", f.code, "--git-dir", filepath.Join(f.code, ".git"), "rev-parse", "HEAD")
	want.Env = []string{"HOME=" + f.home}
	out, err := want.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.remoteRef(t, "refs/heads/d"); got != strings.TrimSpace(string(out)) {
		t.Fatalf("pushed %q; want the code repository's HEAD %q", got, out)
	}
	if exists(marker) {
		t.Fatal("a hook configured through the environment ran")
	}
}

func TestEnviron(t *testing.T) {
	code := t.TempDir()
	host := []string{
		"HOME=/home/u", "SSH_AUTH_SOCK=/tmp/agent", "GIT_DIR=/x", "GIT_WORK_TREE=/y",
		"GIT_CONFIG_PARAMETERS='a'='b'", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=a", "GIT_CONFIG_VALUE_0=b",
		"GIT_CONFIG_GLOBAL=/home/u/.config/git/work", "GIT_SSH_COMMAND=ssh -i k", "GIT_ASKPASS=/bin/ask",
		"GIT_EXEC_PATH=/evil", "GIT_ALLOW_PROTOCOL=file", "GIT_TRACE_REDACT=0", "GIT_LFS_SKIP_SMUDGE=1",
		"GIT_TERMINAL_PROMPT=1", "GIT_EDITOR=vim", "POSIXLY_CORRECT=1", "GREP_OPTIONS=-r",
		"PATH=" + strings.Join([]string{"/usr/bin", "", ".", "bin", code + "/node_modules/.bin", code, "/bin"}, ":"),
	}
	got := Environ(host, []string{code})
	want := []string{
		"HOME=/home/u", "SSH_AUTH_SOCK=/tmp/agent", "GIT_CONFIG_GLOBAL=/home/u/.config/git/work",
		"GIT_SSH_COMMAND=ssh -i k", "GIT_ASKPASS=/bin/ask", "GIT_LFS_SKIP_SMUDGE=1",
		"PATH=/usr/bin:/bin",
		"GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=:", "GIT_SEQUENCE_EDITOR=:", "GIT_MERGE_AUTOEDIT=no", "GIT_PAGER=cat",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Environ =\n%q\nwant\n%q", got, want)
	}
}

func TestPipelinesAndBuiltins(t *testing.T) {
	f := newFixture(t)
	f.git(t, f.code, "push", "-q", "origin", "main")
	for _, tc := range []struct {
		cmd, stdout string
		status      int
	}{
		{`echo start && git ls-remote origin | grep -c refs/heads && printf '%s\n' done`, "start\n1\ndone\n", 0},
		{`git push origin main >/dev/null 2>&1 && echo ok`, "ok\n", 0},
		{`git ls-remote nosuchremote 2>/dev/null || echo failed`, "failed\n", 0},
		{`git ls-remote nosuchremote 2>/dev/null`, "", 128},
		{`git ls-remote nosuchremote 2>&1 | grep -c fatal`, "1\n", 0},
		{`git ls-remote --heads origin | cut -f2 | tr a-z A-Z`, "REFS/HEADS/MAIN\n", 0},
		{`git ls-remote origin | grep -q nothing-like-this`, "", 1},
		{`git ls-remote origin >&2 | wc -l`, "0\n", 0},
	} {
		r := f.run(t, f.route(t, tc.cmd, f.code))
		if r.err != nil || r.status != tc.status || r.stdout != tc.stdout {
			t.Errorf("%s: status %d err %v stdout %q stderr %q; want status %d stdout %q", tc.cmd, r.status, r.err, r.stdout, r.stderr, tc.status, tc.stdout)
		}
	}
}

func TestClone(t *testing.T) {
	f := newFixture(t)
	f.git(t, f.code, "push", "-q", "origin", "main")
	r := f.run(t, f.route(t, "git clone -q "+f.url, f.code))
	if r.err != nil || r.status != 0 {
		t.Fatalf("clone: %+v", r)
	}
	if !exists(filepath.Join(f.code, "remote", "README")) {
		t.Fatalf("clone did not create code/remote: %+v", r)
	}
	// The clone target's parent swapped for a symlink after the decision.
	if err := os.MkdirAll(filepath.Join(f.code, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := f.route(t, "git clone -q "+f.url+" d/x", f.code)
	os.Remove(filepath.Join(f.code, "d"))
	if err := os.Symlink(f.base, filepath.Join(f.code, "d")); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, p); !errors.Is(r.err, ErrOutsideCodeDirs) {
		t.Fatalf("clone through a symlink swapped in after the decision: %+v", r)
	}
	if exists(filepath.Join(f.base, "x")) {
		t.Fatal("clone wrote outside the code dir")
	}
}

func TestDirectorySwappedForSymlink(t *testing.T) {
	f := newFixture(t)
	sub := filepath.Join(f.code, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := f.route(t, "cd sub && git fetch", f.code)
	os.Remove(sub)
	if err := os.Symlink(f.base, sub); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, p); !errors.Is(r.err, ErrOutsideCodeDirs) {
		t.Fatalf("cd into a directory swapped for a symlink: %+v", r)
	}
}

func TestPlantedProgramOnPathIgnored(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(f.base, "planted-ran")
	bin := filepath.Join(f.code, "node_modules", ".bin")
	for _, name := range []string{"git", "grep", "ssh"} {
		writeFile(t, filepath.Join(bin, name), "#!/bin/sh\ntouch '"+marker+"'\n", 0o755)
	}
	t.Setenv("PATH", bin+":.:"+os.Getenv("PATH"))
	r := f.run(t, f.route(t, "git ls-remote origin | grep -c HEAD", f.code))
	if r.err != nil || exists(marker) {
		t.Fatalf("planted programs: %+v marker=%v", r, exists(marker))
	}
}

func TestProgramNotFound(t *testing.T) {
	f := newFixture(t)
	bin := filepath.Join(f.base, "onlygit")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.gitPath, filepath.Join(bin, "git")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	r := f.run(t, f.route(t, "git ls-remote origin | jq -R .", f.code))
	if !errors.Is(r.err, ErrProgramNotFound) || r.stdout != "" {
		t.Fatalf("jq missing: %+v", r)
	}
}

func TestCredentialsRedacted(t *testing.T) {
	f := newFixture(t)
	f.git(t, f.code, "remote", "add", "cred", strings.Replace(f.url, "http://", "http://user:s3cret@", 1))
	r := f.run(t, f.route(t, "GIT_TRACE=1 git ls-remote cred", f.code))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stdout+r.stderr, "s3cret") || !strings.Contains(r.stderr, "http://<redacted>@127.0.0.1") {
		t.Fatalf("trace output not redacted:\n%s", r.stderr)
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hang.Close()
	f.git(t, f.code, "remote", "add", "hang", hang.URL+"/x.git")
	p := f.route(t, "git ls-remote hang", f.code)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, p, []string{f.code}, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the context's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Run took %v after cancellation", d)
	}
}

func TestBadPlans(t *testing.T) {
	f := newFixture(t)
	good := router.Cmd{Kind: router.KindHost, Words: []string{"git", "fetch"}, Args: []string{"git", "fetch"},
		Dir: f.code, Stdout: router.StreamStdout, Stderr: router.StreamStderr, RepoCheck: true}
	plan := func(mod func(c *router.Cmd)) *router.Plan {
		c := good
		mod(&c)
		return &router.Plan{Dir: f.code, Steps: []router.Step{{Pipeline: []router.Cmd{c}}}}
	}
	for name, tc := range map[string]struct {
		p    *router.Plan
		want error
	}{
		"nil plan":          {nil, ErrBadPlan},
		"outside dir":       {plan(func(c *router.Cmd) { c.Dir = f.base }), ErrOutsideCodeDirs},
		"path program":      {plan(func(c *router.Cmd) { c.Args = []string{"/bin/sh", "-c", "x"} }), ErrBadPlan},
		"no repo check":     {plan(func(c *router.Cmd) { c.RepoCheck = false }), ErrBadPlan},
		"bad env":           {plan(func(c *router.Cmd) { c.Env = []string{"GIT_SSH_COMMAND=x"} }), ErrBadPlan},
		"bad stream":        {plan(func(c *router.Cmd) { c.Stdout = "file" }), ErrBadPlan},
		"not a filter":      {plan(func(c *router.Cmd) { c.Kind = router.KindFilter; c.Args = []string{"sh"} }), ErrBadPlan},
		"unknown program":   {plan(func(c *router.Cmd) { c.Args = []string{"no-such-program-sbx"} }), ErrProgramNotFound},
		"relative dir":      {plan(func(c *router.Cmd) { c.Dir = "code" }), ErrOutsideCodeDirs},
		"clone target file": {plan(func(c *router.Cmd) { c.RepoCheck = false; c.CreatesDir = filepath.Join(f.code, "README") }), ErrOutsideCodeDirs},
	} {
		if _, err := Run(context.Background(), tc.p, []string{f.code}, nil, nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v; want %v", name, err, tc.want)
		}
	}
}

func TestRedactLine(t *testing.T) {
	for in, want := range map[string]string{
		"trace: run_command: git remote-https https://user:tok@host/x https://tok@host/x\n": "trace: run_command: git remote-https https://<redacted>@host/x https://<redacted>@host/x\n",
		"To https://github.com/x/y.git\n": "To https://github.com/x/y.git\n",
		"fatal: 'ssh://git@host:22/x'":    "fatal: 'ssh://<redacted>@host:22/x'",
		"no url here":                     "no url here",
	} {
		if got := redactLine(in); got != want {
			t.Errorf("redactLine(%q) = %q; want %q", in, got, want)
		}
	}
}
