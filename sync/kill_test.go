package sync

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKillDuringPullChild is the child of TestKillDuringPull: it applies a
// spooled pull and is killed with SIGKILL somewhere in the middle.
func TestKillDuringPullChild(t *testing.T) {
	host, state, patch := os.Getenv("SBX_KILL_HOST"), os.Getenv("SBX_KILL_STATE"), os.Getenv("SBX_KILL_PATCH")
	if host == "" {
		return // only run as TestKillDuringPull's child
	}
	h, err := OpenHost(state, []HostDir{{Path: host}})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(patch)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReadPull(f); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Finish(HelperReply{Seq: r.Request.Seq}); err != nil {
		t.Fatal(err)
	}
}

func TestKillDuringPull(t *testing.T) {
	const nfiles = 400
	size := 96 << 10
	content := func(kind string, i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("%s-%04d;", kind, i)), size/10)
	}
	for round := 0; round < 4; round++ {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			p := newPair(t)
			for i := 0; i < nfiles; i++ {
				os.WriteFile(filepath.Join(p.host, fmt.Sprintf("f%04d", i)), content("old", i), 0o644)
			}
			p.sync(nil)
			// The sandbox rewrites every file; its pull is built once and
			// applied by a child process that gets killed.
			for i := 0; i < nfiles; i++ {
				os.WriteFile(filepath.Join(p.sandbox, fmt.Sprintf("f%04d", i)), content("new", i), 0o644)
			}
			r, _, err := p.h.Begin()
			if err != nil {
				t.Fatal(err)
			}
			req := r.Request
			req.StateDir, req.Dirs = p.hstate, []HelperDir{{Path: p.sandbox}}
			helper, err := NewHelper(req)
			if err != nil {
				t.Fatal(err)
			}
			var push, pull bytes.Buffer
			r.WritePush(&push)
			helper.Apply(&push)
			helper.Collect(&pull)
			patch := filepath.Join(t.TempDir(), "pull.tar")
			os.WriteFile(patch, pull.Bytes(), 0o600)

			cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringPullChild$")
			cmd.Env = append(os.Environ(), "SBX_KILL_HOST="+p.host, "SBX_KILL_STATE="+p.hstate+"-host", "SBX_KILL_PATCH="+patch)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Kill the child while it applies: once its pull.pending is
			// there. A child fast enough to finish between two looks has
			// applied the whole pull (it exits 0 only then): the checks below
			// hold for that too.
			pending := filepath.Join(p.hstate+"-host", "pull.pending")
			deadline := time.Now().Add(30 * time.Second)
			finished := false
		wait:
			for {
				if _, err := os.Stat(pending); err == nil {
					break
				}
				select {
				case err := <-exited:
					if err != nil {
						t.Fatalf("the child failed before it was killed: %v\n%s", err, out.String())
					}
					finished = true
					break wait
				default:
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					<-exited
					t.Fatalf("the child never started applying:\n%s", out.String())
				}
				time.Sleep(200 * time.Microsecond)
			}
			if !finished {
				time.Sleep(time.Duration(rand.Intn(40)) * time.Millisecond)
				cmd.Process.Kill()
				<-exited
			}

			// Every file is whole: old or new, never a mix or a truncation.
			nnew := 0
			for i := 0; i < nfiles; i++ {
				b, err := os.ReadFile(filepath.Join(p.host, fmt.Sprintf("f%04d", i)))
				switch {
				case err != nil:
					t.Fatalf("f%04d: %v", i, err)
				case bytes.Equal(b, content("new", i)):
					nnew++
				case !bytes.Equal(b, content("old", i)):
					t.Fatalf("f%04d is neither old nor new (%d bytes)", i, len(b))
				}
			}
			if finished {
				t.Logf("the child applied all %d files before it could be killed (%d new)", nfiles, nnew)
			} else {
				t.Logf("killed after %d of %d files", nnew, nfiles)
			}
			entries, _ := os.ReadDir(p.host)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".sbx-tmp-") {
					// A temp file of the interrupted write: harmless, and
					// excluded from sync; the redo below leaves none new.
					os.Remove(filepath.Join(p.host, e.Name()))
				}
			}
			// The next round trip finishes the interrupted pull.
			p.open()
			p.sync(nil)
			for i := 0; i < nfiles; i++ {
				b, _ := os.ReadFile(filepath.Join(p.host, fmt.Sprintf("f%04d", i)))
				if !bytes.Equal(b, content("new", i)) {
					t.Fatalf("f%04d not brought back after the redo", i)
				}
			}
		})
	}
}
