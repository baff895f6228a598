package tools

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/session"
)

// BenchmarkBashCall isolates what the MCP layer adds to a warm `bash true`:
// each iteration times the bash tool called by an MCP client over a pair of
// pipes (sbx-mcp's own StdioTransport on the server side) and then the same command through
// session.Exec on the same session and sandbox. It reports both medians and
// their difference; run with -cpuprofile to see where the difference goes.
// SBX_BENCH_COMMAND times that command through the bash tool instead;
// SBX_BENCH_NOOP a tool call that runs nothing.
//
//	go test ./tools -run '^$' -bench BashCall -benchtime 200x
func BenchmarkBashCall(b *testing.B) {
	code, state := b.TempDir(), b.TempDir()
	p := NewSessions(Config{
		Manager:     session.NewManager(state, &local.Provider{Version: "bench"}, nil),
		Params:      session.Params{CodeDirs: []string{code}},
		DefaultName: "bench",
	})
	defer p.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	go NewServer("bench", p).Run(ctx, &StdioTransport{In: sr, Out: sw})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	viaMCP := func() time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("bash true: %v %v", err, res)
		}
		return d
	}
	if cmd := os.Getenv("SBX_BENCH_COMMAND"); cmd != "" {
		// Profile one command through the bash tool instead, e.g. 200 MB
		// of output: SBX_BENCH_COMMAND="yes | head -c 200000000".
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": cmd}})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", cmd, err, res)
			}
		}
		return
	}
	if os.Getenv("SBX_BENCH_NOOP") != "" {
		// The MCP layer alone: a tool call that runs nothing (bash_output
		// of an unknown job: arguments checked, session found, an error
		// result built and sent).
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash_output", Arguments: map[string]any{"id": "none"}})
			if err != nil || !res.IsError {
				b.Fatalf("bash_output of an unknown job: %v %v", err, res)
			}
		}
		return
	}
	viaMCP() // claims the sandbox
	c, err := p.acquire(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	sess := c.sess
	c.done()
	viaEngine := func() time.Duration {
		var out strings.Builder
		start := time.Now()
		o, err := sess.Exec(ctx, session.Run{Command: "true", Shell: "/bin/bash", Stdout: &out, Stderr: &out, Timeout: DefaultTimeout})
		d := time.Since(start)
		if err != nil || o.ExitCode != 0 {
			b.Fatalf("engine true: %v %d", err, o.ExitCode)
		}
		return d
	}
	for range 5 {
		viaMCP()
		viaEngine()
	}
	var m, e []time.Duration
	for b.Loop() {
		m = append(m, viaMCP())
		e = append(e, viaEngine())
	}
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(m), "mcp-ms")
	b.ReportMetric(med(e), "engine-ms")
	b.ReportMetric(med(m)-med(e), "mcp-layer-ms")
}
