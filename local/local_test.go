package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

func TestMain(m *testing.M) {
	if os.Getenv("SBX_TEST_LOWER_PRIORITY") != "" {
		os.Exit(reportLowered())
	}
	Main()
	os.Exit(m.Run())
}

// claim starts a sandbox with one workspace mounted at a host-looking path
// and releases it when the test ends.
func claim(t *testing.T, mod func(*sandbox.Spec)) (sandbox.Sandbox, string) {
	t.Helper()
	sb, work, err := claimErr(t, mod)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return sb, work
}

// claimErr is claim that returns the claim's error.
func claimErr(t *testing.T, mod func(*sandbox.Spec)) (sandbox.Sandbox, string, error) {
	t.Helper()
	state := shortTempDir(t)
	work := filepath.Join(state, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Name: "t", StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}}
	if mod != nil {
		mod(&spec)
	}
	p := &Provider{Version: "test"}
	sb, err := p.Claim(context.Background(), spec)
	if err != nil {
		return nil, work, err
	}
	t.Cleanup(func() { sb.Release(context.Background()) })
	return sb, work, nil
}

// shortTempDir is a temp dir with a path short enough for a unix socket.
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sbxt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func run(t *testing.T, sb sandbox.Sandbox, script string) (string, sandbox.Result) {
	t.Helper()
	var out bytes.Buffer
	res, err := sb.Exec(context.Background(), &sandbox.Cmd{
		Argv: []string{"/bin/sh", "-c", script}, Dir: "/srv/code",
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sbx"},
		Stdout: &out, Stderr: &out, Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return out.String(), res
}
