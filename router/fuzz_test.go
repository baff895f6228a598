package router

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// FuzzRoute feeds random command strings to the router. Invariants: it never
// panics; no node type reaches the default of check; a parse error routes to
// the sandbox; and whenever it says host, running the command with a real
// bash, in a scratch code dir, with a PATH of logging shims for every program
// name, executes exactly the plan's programs with the plan's arguments and
// directory, prints exactly the plan's echo/printf output, and writes nothing
// outside the code dir.
func FuzzRoute(f *testing.F) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		f.Fatal("FuzzRoute needs bash on PATH (apt-get install bash)")
	}
	l := newLayout(f)
	shims := newShims(f, l)
	prefixes := defaultPrefixes(f)
	for _, r := range routeTable {
		if r.hosts == nil && r.cwd == "" {
			f.Add(l.expand(r.cmd))
		}
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		d, w := decide(cmd, l.code, l.codeDirs(), prefixes)
		if len(w.unhandled) > 0 {
			t.Fatalf("node types reached the default of check: %v", w.unhandled)
		}
		if _, err := syntax.NewParser().Parse(strings.NewReader(cmd), ""); err != nil && d.Where != Sandbox {
			t.Fatalf("parse error %v but routed %s", err, d.Where)
		}
		if !strings.HasPrefix(d.Reason, string(d.Where)+": ") {
			t.Fatalf("reason %q does not start with %q", d.Reason, d.Where)
		}
		if (d.Where == Host) != (d.Plan != nil) {
			t.Fatalf("where=%s plan=%v", d.Where, d.Plan)
		}
		if d.Where != Host {
			return
		}
		checkPlanInvariants(t, l, d.Plan)
		runWithBash(t, bash, l, shims, cmd, d.Plan)
	})
}

// shimNames are the programs the bash runs may find on PATH: every one is a
// logging shim, so running anything is recorded and nothing real runs.
var shimNames = []string{
	"git", "grep", "jq", "head", "tail", "sort", "uniq", "cut", "tr", "wc",
	"rm", "touch", "cat", "tee", "sh", "bash", "dash", "env", "ls", "mkdir", "cp", "mv",
	"curl", "wget", "python3", "perl", "ssh", "xargs", "sed", "awk", "echo", "printf",
	"true", "false", "nohup", "sudo", "time", "dd", "chmod", "ln", "find", "make", "npm",
	"node", "gh", "id", "date", "test", "git-upload-pack", "git-receive-pack", "less",
}

const shimScript = `#!/bin/sh
f="$SBX_LOG/$$"
while [ -e "$f" ]; do f="$f.x"; done
{ printf '%s\000' "${0##*/}" "$PWD"; for a do printf '%s\000' "$a"; done; } > "$f"
while IFS= read -r sbx_line; do :; done
exit 0
`

type shims struct{ dir, logs string }

func newShims(tb testing.TB, l *layout) *shims {
	tb.Helper()
	s := &shims{dir: filepath.Join(l.root, "shims"), logs: filepath.Join(l.root, "logs")}
	for _, d := range []string{s.dir, s.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for _, n := range shimNames {
		if err := os.WriteFile(filepath.Join(s.dir, n), []byte(shimScript), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

type invocation struct {
	name, dir string
	args      []string
}

func (v invocation) String() string { return fmt.Sprintf("%s in %s %q", v.name, v.dir, v.args) }

func runWithBash(t *testing.T, bash string, l *layout, sh *shims, command string, p *Plan) {
	t.Helper()
	logDir, err := os.MkdirTemp(sh.logs, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(logDir)
	before := snapshot(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", command)
	cmd.Dir = l.code
	cmd.Env = []string{"PATH=" + sh.dir, "HOME=" + l.home, "SBX_LOG=" + logDir, "LC_ALL=C"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if after := snapshot(t, l); !reflect.DeepEqual(before, after) {
		t.Errorf("bash -c %q wrote outside the code dir:\n%s", command, diffSnapshots(before, after))
	}
	if runErr != nil {
		t.Errorf("bash -c %q: %v (stderr %q)", command, runErr, stderr.String())
	}

	var got []invocation
	entries, err := os.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(logDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(fields) < 2 {
			t.Fatalf("bad shim log %q", b)
		}
		got = append(got, invocation{name: fields[0], dir: fields[1], args: append([]string{}, fields[2:]...)})
	}

	// What the plan says bash runs when every program succeeds: all steps
	// but those after "||".
	var want []invocation
	var wantOut, wantErr strings.Builder
	for _, st := range p.Steps {
		if st.Op == "||" {
			continue
		}
		for _, c := range st.Pipeline {
			switch c.Kind {
			case KindHost, KindFilter:
				want = append(want, invocation{name: c.Words[0], dir: p.Dir, args: append([]string{}, c.Words[1:]...)})
			case KindBuiltin:
				switch {
				case c.Stdout == StreamStdout && len(st.Pipeline) == 1:
					wantOut.WriteString(c.Output)
				case c.Stdout == StreamStderr:
					wantErr.WriteString(c.Output)
				}
			}
		}
	}
	sortInvocations(got)
	sortInvocations(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bash -c %q ran\n%v\nplan runs\n%v", command, got, want)
	}
	for _, v := range got {
		if v.name != "git" && !filterNames[v.name] {
			t.Errorf("bash -c %q ran %s, which is neither git nor a filter", command, v)
		}
	}
	if stdout.String() != wantOut.String() || stderr.String() != wantErr.String() {
		t.Errorf("bash -c %q printed stdout %q stderr %q; plan prints %q and %q",
			command, stdout.String(), stderr.String(), wantOut.String(), wantErr.String())
	}
}

func sortInvocations(v []invocation) {
	sort.Slice(v, func(i, j int) bool { return v[i].String() < v[j].String() })
}

// snapshot records everything under the layout root except the code dir
// (where host commands may write) and the shim logs.
func snapshot(t *testing.T, l *layout) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(l.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == l.code || p == filepath.Join(l.root, "logs") {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		m[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diffSnapshots(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("changed or removed: %s", k))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("added: %s", k))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
