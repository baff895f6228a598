package main

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/session"
)

// BenchmarkExec measures, side by side in one run, what one `true` costs:
//
//	host-floor   sh -c true run directly on the host (the floor)
//	engine-warm  the same through the engine in-process, on a warm sandbox
//	cli-warm     sbx exec --keep -- true, a process per command, warm sandbox
//	fresh        a new sandbox per command: claim, run, release
//
// Each reports its ratio to the floor as x-floor.
func BenchmarkExec(b *testing.B) {
	var floor float64
	ratio := func(b *testing.B) {
		if floor > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/floor, "x-floor")
		}
	}
	b.Run("host-floor", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		floor = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	code, err := os.MkdirTemp("", "sbxbc")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(code)
	state, err := os.MkdirTemp("", "sbxbs")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(state)
	mgr := session.NewManager(state, &local.Provider{Version: versionString()}, nil)
	params := session.Params{CodeDirs: []string{code}}
	run := session.Run{Argv: []string{"/bin/sh", "-c", "true"}}

	b.Run("engine-warm", func(b *testing.B) {
		s, err := mgr.Open(context.Background(), "warm", params)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Release(context.Background())
		if _, err := s.Exec(context.Background(), run); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Exec(context.Background(), run); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
	})
	b.Run("cli-warm", func(b *testing.B) {
		env := append(os.Environ(), "XDG_STATE_HOME="+state)
		sbx := func(args ...string) {
			cmd := exec.Command(sbxBin, args...)
			cmd.Dir, cmd.Env = code, env
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("sbx %v: %v\n%s", args, err, out)
			}
		}
		sbx("exec", "--keep", "--session", "cli", "--code-dir", code, "--", "true")
		defer sbx("release", "--session", "cli")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sbx("exec", "--keep", "--session", "cli", "--code-dir", code, "--", "true")
		}
		ratio(b)
	})
	b.Run("fresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := mgr.Open(context.Background(), "fresh", params)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Exec(context.Background(), run); err != nil {
				b.Fatal(err)
			}
			if err := s.Release(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		ratio(b)
	})
}
