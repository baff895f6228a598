package session

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/gittest"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/router"
)

// gitRemote serves a bare repository over smart HTTP and returns its URL.
func gitRemote(t *testing.T, home string) (url, bare string) {
	return gittest.HTTPRemote(t, tempDir(t), home)
}

func TestGitPushRunsOnTheHostEverythingElseInTheSandbox(t *testing.T) {
	home := tempDir(t)
	t.Setenv("HOME", home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	url, bare := gitRemote(t, home)
	f := newFixture(t)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first"},
		{"remote", "add", "origin", url},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = f.code
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	prefixes, err := router.ParsePrefixes(router.DefaultHostCommands)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewManager(f.root, &local.Provider{Version: "test"}, nil).Open(context.Background(), "route",
		Params{CodeDirs: []string{f.code}, HostCommands: prefixes, IdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())

	out, o := sh(t, s, "git -c user.name=agent -c user.email=a@example.com commit -q --allow-empty -m made-in-sandbox && git log --oneline | head -1")
	if o.Route.Where != router.Sandbox || o.ExitCode != 0 || !strings.Contains(out, "made-in-sandbox") {
		t.Fatalf("commit in the sandbox: %s exit %d\n%s", o.Route.Reason, o.ExitCode, out)
	}
	out, o = sh(t, s, "git push -q origin HEAD:refs/heads/main")
	if o.Route.Where != router.Host || o.ExitCode != 0 {
		t.Fatalf("push: %s exit %d\n%s", o.Route.Reason, o.ExitCode, out)
	}
	log, err := exec.Command("git", "--git-dir", bare, "log", "--oneline", "main").CombinedOutput()
	if err != nil || !strings.Contains(string(log), "made-in-sandbox") {
		t.Fatalf("the sandbox's commit did not reach the remote: %v\n%s", err, log)
	}
	// Inside a compound command git push stays in the sandbox, where the stub
	// says what to do.
	out, o = sh(t, s, "git push origin main; echo status=$?")
	if o.Route.Where != router.Sandbox || !strings.Contains(out, "status=97") || !strings.Contains(out, "separate") {
		t.Fatalf("stub: %s\n%s", o.Route.Reason, out)
	}
	// Other git sub-commands run the real git in the sandbox.
	if out, o = sh(t, s, "git status --short && echo ok"); o.ExitCode != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("git status through the stub: %s", out)
	}
	// A host git pull that brings in a file host tools trust is reported:
	// it did not come through the quarantine.
	other := filepath.Join(tempDir(t), "other")
	for _, args := range [][]string{{"clone", "-q", url, other}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(filepath.Join(other, ".claude"), 0o755)
	os.WriteFile(filepath.Join(other, ".claude", "settings.json"), []byte(`{"hooks":{}}`), 0o644)
	for _, args := range [][]string{{"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "hook"}, {"push", "-q", "origin", "HEAD:main"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = other
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	s.Notices()
	if out, o = sh(t, s, "git pull -q --ff-only origin main"); o.Route.Where != router.Host || o.ExitCode != 0 {
		t.Fatalf("pull: %s exit %d\n%s", o.Route.Reason, o.ExitCode, out)
	}
	if notes := strings.Join(s.Notices(), "\n"); !strings.Contains(notes, ".claude/settings.json") || !strings.Contains(notes, "quarantine") {
		t.Fatalf("a pulled .claude/settings.json was not reported: %q", notes)
	}
	// Every decision is in the audit log.
	fh, err := os.Open(filepath.Join(f.root, "route", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var wheres []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Session != "route" || e.Reason == "" || e.Time.IsZero() {
			t.Errorf("incomplete audit entry: %s", sc.Text())
		}
		wheres = append(wheres, e.Where)
	}
	if strings.Join(wheres, ",") != "sandbox,host,sandbox,sandbox,host" {
		t.Fatalf("audit log: %v", wheres)
	}
}

// TestAuditLineAsEncodingJSON: an audit line is what encoding/json writes of
// the entry, for the commands a model may send (invalid UTF-8, HTML's
// characters, line and paragraph separators, control bytes).
func TestAuditLineAsEncodingJSON(t *testing.T) {
	for _, c := range []string{"true", "a\xffb\xc3", "echo '<x>' && y", "\u2028\u2029", "\x00\x01\x1f\x7f", "é日本\U0001F600", `"\/`} {
		e := auditEntry{Time: time.Date(2026, 12, 3, 1, 2, 3, 456789, time.FixedZone("x", 3600)), Session: "s", Command: c, Cwd: "/w/" + c,
			Where: "sandbox", Reason: c, ExitCode: -1, DurationMS: 1 << 40, Error: c}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := auditLine(e)
		if err != nil || string(got) != string(want) {
			t.Errorf("command %q: audit line\n%s (%v), encoding/json writes\n%s", c, got, err, want)
		}
	}
}
