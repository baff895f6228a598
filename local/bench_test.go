package local

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/sbx-sh/sbx/sandbox"
)

// BenchmarkLocal compares, in one run, a command in a warm sandbox and a
// fresh sandbox per command against `sh -c true` on the host (the floor).
func BenchmarkLocal(b *testing.B) {
	b.Run("host-floor", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm-exec", func(b *testing.B) {
		state, _ := os.MkdirTemp("", "sbxb")
		defer os.RemoveAll(state)
		p := &Provider{Version: "bench"}
		sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "b", StateDir: state})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Release(context.Background())
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"/bin/sh", "-c", "true"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("claim-release", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			state, _ := os.MkdirTemp("", "sbxb")
			p := &Provider{Version: "bench"}
			sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "b", StateDir: state})
			if err != nil {
				b.Fatal(err)
			}
			sb.Release(context.Background())
			os.RemoveAll(state)
		}
	})
}
