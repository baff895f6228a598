//go:build e2e

package clustere2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/sandbox"
)

// TestInotifyInPod answers whether file watching works in the pool's pods
// (under gVisor in the default passes): a static probe uploaded into a
// claimed pod watches a directory under /tmp (on the pod's root file system,
// where the sync writes a code directory: at its host path, under /tmp in
// these tests) and one on the pool's hostPath cache volume with inotify while another command, in its own exec, creates,
// appends to, renames and removes files there. Every change must arrive as
// its event. A pod whose kernel has no inotify, or drops events made by
// another process, fails here with the probe's output.
func TestInotifyInPod(t *testing.T) {
	probe := filepath.Join(t.TempDir(), "inotifyprobe")
	cmd := exec.Command("go", "build", "-o", probe, "./inotifyprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, b)
	}
	p := cluster.New(saCfg(t), nil)
	sb := claim(t, p, "inotify")
	bin, err := os.Open(probe)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	const dst = sandbox.RunDir + "/inotifyprobe"
	if r, _, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "mkdir -p " + sandbox.RunDir + " && cat > " + dst + " && chmod +x " + dst}, Stdin: bin}); r.ExitCode != 0 {
		t.Fatalf("upload the probe: exit %d %s", r.ExitCode, errs)
	}
	home, tmp := fmt.Sprintf("/tmp/inotify-e2e-%d", os.Getpid()), fmt.Sprintf("/cache/inotify-e2e-%d", os.Getpid())
	if r, _, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"mkdir", "-p", home, tmp}}); r.ExitCode != 0 {
		t.Fatalf("mkdir: exit %d %s", r.ExitCode, errs)
	}
	t.Cleanup(func() { sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"rm", "-rf", home, tmp}}) })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var res sandbox.Result
	go func() {
		var err error
		res, err = sb.Exec(ctx, &sandbox.Cmd{Argv: []string{dst, home, tmp}, Stdout: pw, Stderr: pw})
		pw.CloseWithError(fmt.Errorf("probe exited: %v", err))
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	var got []string
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the probe did not start watching: %q %v", lines.Text(), lines.Err())
	}
	script := fmt.Sprintf("cd %[1]s && echo a > f1 && echo b >> f1 && mv f1 f2 && rm f2 && mkdir d && "+
		"cd %[2]s && echo t > t1 && rm t1 && touch %[1]s/stop", home, tmp)
	if r, _, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", script}}); r.ExitCode != 0 {
		t.Fatalf("changes: exit %d %s", r.ExitCode, errs)
	}
	for lines.Scan() {
		got = append(got, lines.Text())
	}
	if err := <-done; err != nil || res.ExitCode != 0 {
		t.Fatalf("probe: %v, exit %d; output:\n%s", err, res.ExitCode, strings.Join(got, "\n"))
	}
	want := []string{home + " CREATE f1", home + " MODIFY f1", home + " CLOSE_WRITE f1", home + " MOVED_FROM f1",
		home + " MOVED_TO f2", home + " DELETE f2", home + " CREATE d", tmp + " CREATE t1", tmp + " CLOSE_WRITE t1",
		tmp + " DELETE t1", home + " CREATE stop"}
	for _, w := range want {
		if !contains(got, w) {
			t.Errorf("no event %q; the probe saw:\n%s", w, strings.Join(got, "\n"))
		}
	}
	_, kernel, _ := run(t, sb, &sandbox.Cmd{Argv: []string{"uname", "-a"}})
	t.Logf("inotify in the pod (%s, RuntimeClass %q): %d events, every expected one seen", strings.TrimSpace(kernel), os.Getenv("SBX_E2E_RUNTIME_CLASS"), len(got))
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
