package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testtree"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox"
)

// BenchmarkRoundTrip measures a full `true` round trip on the local backend
// (sync in, run, sync out) with code dirs of 0, 10k and 100k files, on a warm
// session; x-empty is the ratio to the empty code dir.
func BenchmarkRoundTrip(b *testing.B) {
	var empty float64
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			code := tempDir(b)
			if n > 0 {
				code = testtree.Cached(b, n)
			}
			mgr := NewManager(tempDir(b), &local.Provider{Version: "bench"}, nil)
			s, err := mgr.Open(context.Background(), "bench", Params{CodeDirs: []string{code}})
			if err != nil {
				b.Fatal(err)
			}
			// Releasing removes the sandbox's copy of the tree (seconds at
			// 100k files): outside the timed part.
			defer func() { b.StopTimer(); s.Release(context.Background()) }()
			run := Run{Command: "true"}
			for i := 0; i < 2; i++ { // claim, push everything, settle the racy window
				if _, err := s.Exec(context.Background(), run); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Exec(context.Background(), run); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n == 0 {
				empty = per
			} else if empty > 0 {
				b.ReportMetric(per/empty, "x-empty")
			}
		})
	}
}

// BenchmarkExecParts splits a warm `bash true` (Session.Exec on an empty
// code dir, local backend) into its parts, each a sub-benchmark on the same
// warm sandbox: a raw exec of /bin/true and of `/bin/bash -c true` (the
// matrix's baseline), `/bin/sh -c 'exec /bin/bash -c true'` (the cost of the
// wrapper's sh stage), the shell wrapper without and with the fd 3 cwd
// report, a sync round trip around /bin/true (the sync's own cost), and the
// whole Session.Exec. See docs/benchmarks.md (per-command overhead).
func BenchmarkExecParts(b *testing.B) {
	ctx := context.Background()
	code := tempDir(b)
	mgr := NewManager(tempDir(b), &local.Provider{Version: "bench"}, nil)
	s, err := mgr.Open(ctx, "bench", Params{CodeDirs: []string{code}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release(ctx)
	for i := 0; i < 2; i++ { // claim, settle the racy window
		if _, err := s.Exec(ctx, Run{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	sb := s.sb
	wrapper := func(track bool) *sandbox.Cmd {
		s.mu.Lock()
		defer s.mu.Unlock()
		cmd, _, _ := s.command(Run{Command: "true", Shell: "/bin/bash"}, track)
		return cmd
	}
	exec := func(b *testing.B, cmd func() *sandbox.Cmd) {
		for i := 0; i < b.N; i++ {
			res, err := sb.Exec(ctx, cmd())
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exit %d, %v", res.ExitCode, err)
			}
		}
	}
	argv := func(a ...string) func() *sandbox.Cmd {
		return func() *sandbox.Cmd { return &sandbox.Cmd{Argv: a, Env: BaseEnv(false)} }
	}
	b.Run("raw-true", func(b *testing.B) { exec(b, argv("/bin/true")) })
	b.Run("raw-bash", func(b *testing.B) { exec(b, argv("/bin/bash", "-c", "true")) })
	b.Run("sh-exec-bash", func(b *testing.B) { exec(b, argv("/bin/sh", "-c", "exec /bin/bash -c true")) })
	b.Run("wrapper", func(b *testing.B) { exec(b, func() *sandbox.Cmd { return wrapper(false) }) })
	b.Run("wrapper-fd3", func(b *testing.B) { exec(b, func() *sandbox.Cmd { return wrapper(true) }) })
	b.Run("sync-true", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			res, _, err := s.roundTrip(ctx, sb, argv("/bin/true")())
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exit %d, %v", res.ExitCode, err)
			}
		}
	})
	b.Run("session-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			out, err := s.Exec(ctx, Run{Command: "true", Shell: "/bin/bash"})
			if err != nil || out.ExitCode != 0 {
				b.Fatalf("exit %d, %v", out.ExitCode, err)
			}
		}
	})
}

// BenchmarkExecPartsInterleaved runs the parts of BenchmarkExecParts
// round-robin on one warm sandbox, b.N rounds, and reports each part's
// median (ms-<part>) and the whole Session.Exec against a raw
// `/bin/bash -c true` (x-raw-bash): on a shared, loaded machine only
// interleaved figures compare.
//
//	go test ./session -run XXX -bench ExecPartsInterleaved -benchtime 300x
func BenchmarkExecPartsInterleaved(b *testing.B) {
	ctx := context.Background()
	mgr := NewManager(tempDir(b), &local.Provider{Version: "bench"}, nil)
	s, err := mgr.Open(ctx, "bench", Params{CodeDirs: []string{tempDir(b)}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release(ctx)
	for i := 0; i < 2; i++ {
		if _, err := s.Exec(ctx, Run{Command: "true"}); err != nil {
			b.Fatal(err)
		}
	}
	sb := s.sb
	raw := func(a ...string) func() error {
		return func() error {
			res, err := sb.Exec(ctx, &sandbox.Cmd{Argv: a, Env: BaseEnv(false)})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		}
	}
	parts := []struct {
		name string
		run  func() error
	}{
		{"raw-true", raw("/bin/true")},
		{"raw-bash", raw("/bin/bash", "-c", "true")},
		{"raw-bash-out", func() error { // with its output captured, as the bash tool's (a pipe and its copier)
			var out strings.Builder
			_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", "true"}, Env: BaseEnv(false), Stdout: &out, Stderr: &out})
			return err
		}},
		{"bash-nolang", func() error { // raw-bash without LANG (no locale files read)
			_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", "true"}, Env: BaseEnv(false)[:2]})
			return err
		}},
		{"bash-inline", func() error { // the wrapper's script on the -c line instead of fd 4
			s.mu.Lock()
			cmd, _, _ := s.command(Run{Command: "true", Shell: "/bin/bash"}, true)
			s.mu.Unlock()
			_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", strings.Replace(string(cmd.Fd4), "unset BASH_ENV; exec 4<&-\n", "", 1) + "true"}, Env: BaseEnv(false), Fd3: &cwdReport{}})
			return err
		}},
		{"bash-trap", func() error { // only the EXIT trap from fd 4, the worker starting it in the directory
			s.mu.Lock()
			cmd, _, dir := s.command(Run{Command: "true", Shell: "/bin/bash"}, true)
			s.mu.Unlock()
			_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: cmd.Argv, Dir: dir, Env: cmd.Env, Fd3: &cwdReport{}, Fd4: []byte("unset BASH_ENV; exec 4<&-\ntrap 'pwd -P >&3' EXIT\n")})
			return err
		}},
		{"bash-fd3", func() error { // raw-bash with a cwd report collected from fd 3
			_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", "pwd -P >&3"}, Env: BaseEnv(false), Fd3: &cwdReport{}})
			return err
		}},
		{"bash-fd4", func() error { // raw-bash reading the wrapper's script from fd 4 (BASH_ENV)
			s.mu.Lock()
			cmd, _, _ := s.command(Run{Command: "true", Shell: "/bin/bash"}, true)
			s.mu.Unlock()
			_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: cmd.Argv, Env: cmd.Env, Fd4: cmd.Fd4})
			return err
		}},
		{"bash-cmd", func() error { // the command Session.Exec runs, without the sync
			s.mu.Lock()
			cmd, _, _ := s.command(Run{Command: "true", Shell: "/bin/bash"}, true)
			s.mu.Unlock()
			_, err := sb.Exec(ctx, cmd)
			return err
		}},
		{"sync-bash", func() error { // a sync round trip around raw-bash
			_, _, err := s.roundTrip(ctx, sb, &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", "true"}, Env: BaseEnv(false)})
			return err
		}},
		{"sync-true", func() error {
			_, _, err := s.roundTrip(ctx, sb, &sandbox.Cmd{Argv: []string{"/bin/true"}, Env: BaseEnv(false)})
			return err
		}},
		{"session-exec", func() error {
			_, err := s.Exec(ctx, Run{Command: "true", Shell: "/bin/bash"})
			return err
		}},
	}
	took := make([][]time.Duration, len(parts))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, p := range parts {
			t0 := time.Now()
			if err := p.run(); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			took[j] = append(took[j], time.Since(t0))
		}
	}
	b.StopTimer()
	med := make([]float64, len(parts))
	for j, p := range parts {
		slices.Sort(took[j])
		med[j] = float64(took[j][len(took[j])/2].Microseconds()) / 1000
		b.ReportMetric(med[j], "ms-"+p.name)
	}
	b.ReportMetric(med[len(parts)-1]/med[1], "x-raw-bash")
}
