// Command mcp measures what the MCP layer costs, side by side in one run: a
// bash call of `true` through sbx-mcp over stdio on a warm session against the
// same command through the session engine in-process, sbx-mcp's start-up
// time, and its resident memory when idle. It prints a Markdown table.
//
//	go run ./bench/mcp [-n 200] [-bin path/to/sbx-mcp]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
)

func main() {
	local.Main() // the in-process engine starts sandboxes from this binary
	n := flag.Int("n", 200, "calls per side")
	bin := flag.String("bin", "", "sbx-mcp binary (default: build it)")
	flag.Parse()
	if err := run(*n, *bin); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(n int, bin string) error {
	tmp, err := os.MkdirTemp("", "sbxb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	code := filepath.Join(tmp, "code")
	state := filepath.Join(tmp, "s")
	for _, d := range []string{filepath.Join(code, ".git"), filepath.Join(code, "src"), state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for i := range 50 {
		os.WriteFile(filepath.Join(code, "src", fmt.Sprintf("f%d.go", i)), []byte("package src\n"), 0o644)
	}
	if bin == "" {
		bin = filepath.Join(tmp, "sbx-mcp")
		build := exec.Command("go", "build", "-o", bin, "github.com/sbx-sh/sbx/cmd/sbx-mcp")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build sbx-mcp: %w", err)
		}
	}
	os.Setenv("XDG_STATE_HOME", state)
	env := append(os.Environ(), "XDG_STATE_HOME="+state)
	ctx := context.Background()

	// Start-up: process start to a finished initialize handshake, and the
	// resident memory of a server that has answered but claimed nothing.
	var startups []time.Duration
	var idleRSS int64
	for i := range 10 {
		cmd := exec.Command(bin)
		cmd.Dir, cmd.Env = code, env
		start := time.Now()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return fmt.Errorf("start sbx-mcp: %w", err)
		}
		startups = append(startups, time.Since(start))
		if i == 9 {
			if _, err := cs.ListTools(ctx, nil); err != nil {
				return err
			}
			time.Sleep(500 * time.Millisecond)
			idleRSS = rss(cmd.Process.Pid)
		}
		cs.Close()
	}

	// The MCP side: one server, one warm session.
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = code, env
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	callMCP := func() (time.Duration, error) {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
		d := time.Since(start)
		if err == nil && res.IsError {
			err = fmt.Errorf("bash true: %v", res.Content)
		}
		return d, err
	}

	// The engine side, in this process.
	root := filepath.Join(state, "sbx", "sessions")
	mgr := session.NewManager(root, &local.Provider{Version: "bench"}, nil)
	realCode, _ := filepath.EvalSymlinks(code)
	// The same session as sbx-mcp sets up with the default configuration
	// (router and audit log included).
	cfg := config.Defaults()
	hostCommands, err := router.ParsePrefixes(cfg.HostCommands)
	if err != nil {
		return err
	}
	s, err := mgr.Open(ctx, "bench-engine", session.Params{
		CodeDirs: []string{realCode}, Network: sandbox.Network(cfg.Network),
		Limits:  sandbox.Limits{MemoryBytes: cfg.Memory, Pids: cfg.Pids, DiskBytes: cfg.Disk},
		IdleTTL: cfg.IdleTTL + 5*time.Minute, HostCommands: hostCommands, Exclude: cfg.Exclude,
		MemoryWorkspace: cfg.Workspace == "auto",
	})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	callEngine := func() (time.Duration, error) {
		var out bytes.Buffer
		start := time.Now()
		o, err := s.Exec(ctx, session.Run{Command: "true", Shell: "/bin/bash", Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute})
		d := time.Since(start)
		if err == nil && o.ExitCode != 0 {
			err = fmt.Errorf("exit %d", o.ExitCode)
		}
		return d, err
	}
	// Warm both, then alternate so that drift hits both sides alike.
	for range 5 {
		if _, err := callMCP(); err != nil {
			return err
		}
		if _, err := callEngine(); err != nil {
			return err
		}
	}
	warmRSS := rss(cmd.Process.Pid)
	var viaMCP, viaEngine []time.Duration
	for range n {
		d, err := callMCP()
		if err != nil {
			return err
		}
		viaMCP = append(viaMCP, d)
		d, err = callEngine()
		if err != nil {
			return err
		}
		viaEngine = append(viaEngine, d)
	}
	busyRSS := rss(cmd.Process.Pid)
	// The MCP layer alone: a JSON-RPC ping, and a tool call that runs
	// nothing in the sandbox (bash_output of an unknown job: arguments
	// validated, session looked up, an error result built).
	var pings, noops []time.Duration
	for range n {
		start := time.Now()
		if err := cs.Ping(ctx, nil); err != nil {
			return err
		}
		pings = append(pings, time.Since(start))
		start = time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash_output", Arguments: map[string]any{"id": "none"}})
		if err != nil || !res.IsError {
			return fmt.Errorf("bash_output of an unknown job: %v %v", err, res)
		}
		noops = append(noops, time.Since(start))
	}

	mm, me := median(viaMCP), median(viaEngine)
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| `bash true` via sbx-mcp over stdio, warm session (median of %d; min; p90) | %s (min %s, p90 %s) |\n", n, ms(mm), ms(pct(viaMCP, 0)), ms(pct(viaMCP, 90)))
	fmt.Printf("| same command via session.Exec in-process (median of %d; min; p90) | %s (min %s, p90 %s) |\n", n, ms(me), ms(pct(viaEngine, 0)), ms(pct(viaEngine, 90)))
	fmt.Printf("| difference of the medians (of the minimums) | %s (%s); %.2fx the engine |\n", ms(mm-me), ms(pct(viaMCP, 0)-pct(viaEngine, 0)), float64(mm)/float64(me))
	fmt.Printf("| MCP layer alone: tools/call that runs nothing (median of %d; p90) | %s (p90 %s) |\n", n, ms(median(noops)), ms(pct(noops, 90)))
	fmt.Printf("| MCP layer alone: JSON-RPC ping round trip (median of %d) | %s |\n", n, ms(median(pings)))
	fmt.Printf("| sbx-mcp start-up to initialized (median of %d) | %s |\n", len(startups), ms(median(startups)))
	fmt.Printf("| sbx-mcp idle RSS (initialized, nothing claimed) | %.1f MB |\n", float64(idleRSS)/1e6)
	fmt.Printf("| sbx-mcp RSS with a warm session | %.1f MB (after %d calls: %.1f MB) |\n", float64(warmRSS)/1e6, n+5, float64(busyRSS)/1e6)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\n%s/%s, %d CPUs, %s, load average %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), strings.Join(strings.Fields(string(load))[:3], " "))
	return nil
}

func rss(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb * 1024
		}
	}
	return 0
}

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }
