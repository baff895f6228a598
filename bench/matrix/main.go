// Command matrix is issue 13's benchmark matrix, end to end: it builds the
// real sbx-mcp and sbx binaries, drives them as a user does (an MCP client
// over stdio, `sbx exec --keep` as a process per command), and measures each
// figure against its baseline in the same run, interleaved. Trees are aged
// past the racy window and edited before they are measured. It prints
// Markdown tables for docs/benchmarks.md.
//
//	go run ./bench/matrix [-only warm,output,memory,tree] [-sizes 1000,10000,100000] [-n 50]
//
// Sections:
//   - warm: `bash true` through sbx-mcp on an empty code dir against a raw
//     exec (local.Provider.Attach + Sandbox.Exec of `/bin/bash -c true`) into
//     the same warm sandbox, and against the floor: that raw exec as the one
//     tool of an MCP server on the same SDK (floor.go);
//   - output: a command printing 200 MB through the bash tool against the
//     same command on the host into a pipe;
//   - memory: PSS of an idle local session (its init and workers), one and
//     fifty sessions, right after a command and past the worker trim (2
//     minutes idle), and the first command after the trim;
//   - tree: per size, the initial push against `tar c | tar x`, no-change
//     `bash true` against the empty code dir, after 10% of the files were
//     edited, one and 1,000 changed files, `sbx exec --keep -- true` against a
//     stat walk (`find -printf`), and a repository cloned just before the
//     session starts (the 3 calls after its first, and later ones).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
)

func main() {
	app.Main() // the in-process engine's sandbox init re-executes this binary
	if os.Getenv(floorEnv) != "" {
		os.Exit(serveFloor())
	}
	only := flag.String("only", "warm,output,memory,tree", "sections to run, comma-separated (push: the tree section's initial push rows only)")
	sizes := flag.String("sizes", "1000,10000,100000", "tree sizes (files) for the tree section")
	n := flag.Int("n", 50, "timed calls per side where calls are repeated")
	sessions := flag.Int("sessions", 50, "sessions for the many-sessions memory figure")
	base := flag.String("dir", "", "where the run's trees, state (the sandboxes' workspaces) and tar copies live: a tmpfs (/dev/shm) or a disk file system; empty is $TMPDIR")
	pushes := flag.Int("pushes", 3, "initial pushes per tree size (each a new session), interleaved with as many tar copies")
	flag.Parse()
	b, err := setup(*base)
	if err != nil {
		fmt.Fprintf(os.Stderr, "matrix: %v\n", err)
		if b != nil {
			b.cleanup()
		}
		os.Exit(1)
	}
	defer b.cleanup()
	b.n, b.pushes = *n, max(1, *pushes)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%s/%s, %d CPUs, %s, start %s, load average %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(),
		time.Now().UTC().Format("2006-01-02 15:04"), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("trees, workspaces and tar copies in %s (%s)\n\n", b.tmp, fsType(b.tmp))
	for _, s := range strings.Split(*only, ",") {
		var err error
		switch s {
		case "warm":
			err = b.warm()
		case "output":
			err = b.output()
		case "memory":
			err = b.memory(*sessions)
		case "tree", "push":
			for _, f := range strings.Split(*sizes, ",") {
				k, _ := strconv.Atoi(f)
				if err = b.tree(k, s == "push"); err != nil {
					break
				}
			}
		default:
			err = fmt.Errorf("unknown section %q", s)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "matrix: %s: %v\n", s, err)
			b.cleanup()
			os.Exit(1)
		}
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("\nend %s, load average %s\n", time.Now().UTC().Format("15:04"), strings.Join(strings.Fields(string(load))[:3], " "))
}

type bench struct {
	tmp, state, mcpBin, sbxBin, version string
	env                                 []string
	n, pushes                           int
	servers                             []*server
	empty                               *server // sbx-mcp on an empty code dir, shared by the sections
}

// fsType names the file system holding dir (statfs's magic number).
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err.Error()
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xef53:
		return "ext2/3/4"
	case 0x58465342:
		return "xfs"
	case 0x9123683e:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

func setup(base string) (*bench, error) {
	tmp, err := os.MkdirTemp(base, "sbxm")
	if err != nil {
		return nil, err
	}
	b := &bench{tmp: tmp, state: filepath.Join(tmp, "state")}
	b.env = append(os.Environ(), "XDG_STATE_HOME="+b.state, "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"))
	for name, pkg := range map[string]string{"sbx-mcp": "./cmd/sbx-mcp", "sbx": "./cmd/sbx"} {
		out := filepath.Join(tmp, name)
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return b, fmt.Errorf("build %s: %w", pkg, err)
		}
	}
	b.mcpBin, b.sbxBin = filepath.Join(tmp, "sbx-mcp"), filepath.Join(tmp, "sbx")
	v, err := exec.Command(b.mcpBin, "--version").Output()
	if err != nil {
		return b, fmt.Errorf("sbx-mcp --version: %w", err)
	}
	b.version = strings.TrimPrefix(strings.TrimSpace(string(v)), "sbx-mcp ")
	return b, nil
}

func (b *bench) cleanup() {
	for _, s := range b.servers {
		s.close()
	}
	b.servers = nil
	// Kept CLI sessions of the memory and tree sections.
	if ents, err := os.ReadDir(filepath.Join(b.state, "sbx", "sessions")); err == nil {
		for _, e := range ents {
			c := exec.Command(b.sbxBin, "release", "--session", e.Name())
			c.Env, c.Dir = b.env, b.tmp
			c.Run()
		}
	}
	os.RemoveAll(b.tmp)
}

// server is one sbx-mcp over stdio with its session.
type server struct {
	name string
	dir  string
	cmd  *exec.Cmd
	cs   *mcp.ClientSession
}

func (b *bench) start(name, dir string) (*server, error) {
	cmd := exec.Command(b.mcpBin, "--session", name, "--code-dir", dir)
	cmd.Dir, cmd.Env = dir, b.env
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "matrix"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("start sbx-mcp: %w", err)
	}
	s := &server{name: name, dir: dir, cmd: cmd, cs: cs}
	b.servers = append(b.servers, s)
	return s, nil
}

func (s *server) close() {
	if s.cs != nil {
		s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "release", Arguments: map[string]any{}})
		s.cs.Close()
		s.cs = nil
	}
}

// bash runs command through the bash tool and returns the call's time and
// the text of its result.
func (s *server) bash(command string) (time.Duration, string, error) {
	start := time.Now()
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "timeout": 600000}})
	d := time.Since(start)
	if err != nil {
		return d, "", fmt.Errorf("bash %q: %w", command, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError || !strings.Contains(text.String(), "Exit code: 0") {
		return d, text.String(), fmt.Errorf("bash %q failed: %.500s", command, text.String())
	}
	return d, text.String(), nil
}

func (s *server) times(command string, n int) ([]time.Duration, error) {
	var ds []time.Duration
	for range n {
		d, _, err := s.bash(command)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

func (b *bench) emptyServer() (*server, error) {
	if b.empty != nil {
		return b.empty, nil
	}
	dir := filepath.Join(b.tmp, "empty")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s, err := b.start("empty", dir)
	if err != nil {
		return nil, err
	}
	if _, err := s.times("true", 5); err != nil {
		return nil, err
	}
	b.empty = s
	return s, nil
}

func (b *bench) sessionDir(name string) string {
	return filepath.Join(b.state, "sbx", "sessions", name)
}

// warm: bash true through sbx-mcp against a raw exec into the same sandbox.
func (b *bench) warm() error {
	s, err := b.emptyServer()
	if err != nil {
		return err
	}
	p := &local.Provider{Version: b.version}
	sb, err := p.Attach(context.Background(), sandbox.Spec{Name: s.name, StateDir: b.sessionDir(s.name)})
	if err != nil {
		return fmt.Errorf("attach to sbx-mcp's sandbox: %w", err)
	}
	raw := func() (time.Duration, error) {
		start := time.Now()
		r, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", "true"}})
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("raw exec: exit %d", r.ExitCode)
		}
		return time.Since(start), err
	}
	// The engine alone: session.Exec in this process, on a session wired
	// as sbx-mcp wires its own (internal/app, the default configuration),
	// in another empty code dir.
	edir := filepath.Join(b.tmp, "engine")
	if err := os.MkdirAll(edir, 0o755); err != nil {
		return err
	}
	wd, _ := os.Getwd()
	os.Setenv("XDG_STATE_HOME", b.state)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(b.tmp, "config"))
	os.Chdir(edir)
	env, err := app.Setup(app.Flags{}, app.Server, nil)
	os.Chdir(wd)
	if err != nil {
		return fmt.Errorf("wire the in-process engine: %w", err)
	}
	es, err := env.Manager.Open(context.Background(), "engine", env.Params)
	if err != nil {
		return err
	}
	defer es.Release(context.Background())
	engine := func() (time.Duration, error) {
		var out strings.Builder
		start := time.Now()
		o, err := es.Exec(context.Background(), session.Run{Command: "true", Shell: "/bin/bash", Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute})
		if err == nil && o.ExitCode != 0 {
			err = fmt.Errorf("engine: exit %d", o.ExitCode)
		}
		return time.Since(start), err
	}
	floor, err := b.startFloor(s.name, b.sessionDir(s.name))
	if err != nil {
		return err
	}
	defer floor.cs.Close()
	var viaMCP, viaRaw, viaEngine, viaFloor []time.Duration
	for i := range 5 + b.n*4 {
		dm, _, err := s.bash("true")
		if err != nil {
			return err
		}
		dr, err := raw()
		if err != nil {
			return err
		}
		de, err := engine()
		if err != nil {
			return err
		}
		df, _, err := floor.bash("true")
		if err != nil {
			return fmt.Errorf("the floor server: %w", err)
		}
		if i >= 5 {
			viaMCP, viaRaw, viaEngine, viaFloor = append(viaMCP, dm), append(viaRaw, dr), append(viaEngine, de), append(viaFloor, df)
		}
	}
	mm, mr, me, mf := median(viaMCP), median(viaRaw), median(viaEngine), median(viaFloor)
	fmt.Printf("### warm `bash true`, empty code dir (%d calls each, interleaved)\n\n", len(viaMCP))
	fmt.Printf("| path | median | min | p90 |\n|---|---|---|---|\n")
	fmt.Printf("| sbx-mcp `bash true` | %s | %s | %s |\n", ms(mm), ms(pct(viaMCP, 0)), ms(pct(viaMCP, 90)))
	fmt.Printf("| the engine alone: `session.Exec` in-process, same wiring, its own sandbox | %s | %s | %s |\n", ms(me), ms(pct(viaEngine, 0)), ms(pct(viaEngine, 90)))
	fmt.Printf("| raw exec `/bin/bash -c true` into sbx-mcp's sandbox | %s | %s | %s |\n", ms(mr), ms(pct(viaRaw, 0)), ms(pct(viaRaw, 90)))
	fmt.Printf("| the floor: the same raw exec as the one tool of an MCP server on the same SDK, same client | %s | %s | %s |\n", ms(mf), ms(pct(viaFloor, 0)), ms(pct(viaFloor, 90)))
	fmt.Printf("| **ratio sbx-mcp / raw** (goal <= 1.5x, aim 1.2x) | **%.2fx** | %.2fx | |\n", ratio(mm, mr), ratio(pct(viaMCP, 0), pct(viaRaw, 0)))
	fmt.Printf("| of the difference: the engine (engine - raw) | +%s | | |\n", ms(me-mr))
	fmt.Printf("| of the difference: the MCP layer and stdio (sbx-mcp - engine) | +%s | | |\n", ms(mm-me))
	fmt.Printf("| the protocol through the SDK alone (floor - raw) | +%s: %.2fx raw | | |\n", ms(mf-mr), ratio(mf, mr))
	fmt.Printf("| sbx's own (sbx-mcp - floor) | +%s | | |\n\n", ms(mm-mf))
	return nil
}

// output: 200 MB through the bash tool against the same command into a
// pipe on the host.
func (b *bench) output() error {
	s, err := b.emptyServer()
	if err != nil {
		return err
	}
	const size = 200_000_000
	// Mixed ASCII and multi-byte UTF-8, so that the cut and the count meet
	// both.
	command := fmt.Sprintf("yes 'héllo wörld — ✓ 0123456789 abcdefghijklmnopqrstuvwxyz' | head -c %d", size)
	host := func() (time.Duration, error) {
		c := exec.Command("/bin/bash", "-c", command)
		out, err := c.StdoutPipe()
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if err := c.Start(); err != nil {
			return 0, err
		}
		n, _ := io.Copy(io.Discard, out)
		err = c.Wait()
		d := time.Since(start)
		if err == nil && n != size {
			err = fmt.Errorf("host pipe read %d bytes, not %d", n, size)
		}
		return d, err
	}
	var viaMCP, viaPipe []time.Duration
	u0, s0 := cpuTimes(s.cmd.Process.Pid)
	for range 7 {
		d, text, err := s.bash(command)
		if err != nil {
			return err
		}
		if !strings.Contains(text, "characters truncated") {
			return fmt.Errorf("200 MB came back uncut")
		}
		viaMCP = append(viaMCP, d)
		d, err = host()
		if err != nil {
			return err
		}
		viaPipe = append(viaPipe, d)
	}
	u1, s1 := cpuTimes(s.cmd.Process.Pid)
	mm, mp := median(viaMCP), median(viaPipe)
	bm, bp := pct(viaMCP, 0), pct(viaPipe, 0)
	defer fmt.Printf("sbx-mcp's CPU per 200 MB call: %s user, %s system (7 calls and 7 host runs between the readings)\n\n", ms((u1-u0)/7), ms((s1-s0)/7))
	fmt.Printf("### output: 200 MB printed (%d runs each, alternating)\n\n", len(viaMCP))
	fmt.Printf("| path | median time | throughput | best time | throughput |\n|---|---|---|---|---|\n")
	fmt.Printf("| sbx-mcp `bash` call | %s | %.0f MB/s | %s | %.0f MB/s |\n", ms(mm), size/mm.Seconds()/1e6, ms(bm), size/bm.Seconds()/1e6)
	fmt.Printf("| the same command on the host into a pipe | %s | %.0f MB/s | %s | %.0f MB/s |\n", ms(mp), size/mp.Seconds()/1e6, ms(bp), size/bp.Seconds()/1e6)
	fmt.Printf("| **throughput ratio** (goal >= 0.5x) | **%.2fx** | | **%.2fx** | |\n\n", ratio(mp, mm), ratio(bp, bm))
	return nil
}

// pss sums the proportional set size of pid and its descendants.
func pss(pid int) (total int64, procs int) {
	var walk func(int)
	walk = func(p int) {
		procs++
		total += smapsField(p, "Pss:")
		for _, c := range childrenOf(p) {
			walk(c)
		}
	}
	walk(pid)
	return total, procs
}

// smapsField reads one field (in kB) of /proc/pid/smaps_rollup, in bytes.
func smapsField(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == field {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuTimes is a process's user and system CPU time (/proc/pid/stat,
// clock ticks of 10 ms).
func cpuTimes(pid int) (user, system time.Duration) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u) * 10 * time.Millisecond, time.Duration(k) * 10 * time.Millisecond
}

func (b *bench) initPid(session string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(b.sessionDir(session), "local.json"))
	if err != nil {
		return 0, err
	}
	i := strings.Index(string(raw), `"pid":`)
	if i < 0 {
		return 0, fmt.Errorf("no pid in %s", raw)
	}
	var pid int
	fmt.Sscan(strings.TrimLeft(string(raw[i+6:]), " "), &pid)
	return pid, nil
}

// sbx runs the CLI in the code dir its --code-dir names (sbx exec wants to
// be inside one), else in the temp dir.
func (b *bench) sbx(args ...string) (time.Duration, error) { return b.sbxEnv(nil, args...) }

// waitDaemon waits until the kept session's host daemon (internal/hostd)
// has its socket, so that the next call goes through it.
func (b *bench) waitDaemon(name string) error {
	sock := filepath.Join(b.state, "sbx", "sessions", name, "hostd.sock")
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
	}
	return fmt.Errorf("session %s: no host daemon within 60 s (%s)", name, sock)
}

// sbxEnv is sbx with env added to the environment.
func (b *bench) sbxEnv(env []string, args ...string) (time.Duration, error) {
	start := time.Now()
	if _, err := b.sbxOutput(env, args...); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// sbxOutput is sbxEnv's run, with what it printed on both streams.
func (b *bench) sbxOutput(env []string, args ...string) (string, error) {
	c := exec.Command(b.sbxBin, args...)
	c.Env, c.Dir = append(append([]string(nil), b.env...), env...), b.tmp
	if i := slices.Index(args, "--code-dir"); i >= 0 && i+1 < len(args) {
		c.Dir = args[i+1]
	}
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("sbx %s: %w: %.500s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// memory: PSS of idle local sessions, right after their last command (the
// init and its one idle worker) and once the init has trimmed its idle
// worker (workerIdleTTL, 2 minutes), and what the first command costs then: a
// raw exec (Attach + Exec) into a trimmed sandbox against one into a warm
// sandbox, alternately.
func (b *bench) memory(many int) error {
	dir := filepath.Join(b.tmp, "memcode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var pids []int
	for i := range many {
		name := fmt.Sprintf("mem%02d", i)
		if _, err := b.sbx("exec", "--keep", "--session", name, "--code-dir", dir, "--", "true"); err != nil {
			return err
		}
		pid, err := b.initPid(name)
		if err != nil {
			return err
		}
		pids = append(pids, pid)
	}
	type mem struct {
		sum, one, oneAnon int64
		procs             int
	}
	measure := func() mem {
		var m mem
		for i, pid := range pids {
			p, k := pss(pid)
			m.sum += p
			if i == 0 {
				m.one, m.procs = p, k
				m.oneAnon = pssAnon(pid)
			}
		}
		return m
	}
	// Settled: the total stops moving (a measuring interval, not
	// synchronization).
	settle := func(d time.Duration) mem {
		var m mem
		deadline := time.Now().Add(d)
		for prev := int64(-1); time.Now().Before(deadline); prev = m.sum {
			time.Sleep(time.Second)
			m = measure()
			if prev >= 0 && abs(m.sum-prev) < m.sum/200 {
				break
			}
		}
		return m
	}
	busy := settle(10 * time.Second)
	// Past the trim (local's workerIdleTTL, 2 minutes): wait until every
	// init is alone, at most 4 minutes.
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		alone := 0
		for _, pid := range pids {
			if _, k := pss(pid); k == 1 {
				alone++
			}
		}
		if alone == len(pids) {
			break
		}
		time.Sleep(time.Second)
	}
	idle := settle(10 * time.Second)

	// The first command into a trimmed sandbox against a warm one.
	p := &local.Provider{Version: b.version}
	attach := func(i int) (sandbox.Sandbox, error) {
		name := fmt.Sprintf("mem%02d", i)
		return p.Attach(context.Background(), sandbox.Spec{Name: name, StateDir: b.sessionDir(name)})
	}
	rawExec := func(sb sandbox.Sandbox) (time.Duration, error) {
		start := time.Now()
		r, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", "true"}})
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("exit %d", r.ExitCode)
		}
		return time.Since(start), err
	}
	warmSB, err := attach(0)
	if err != nil {
		return err
	}
	if _, err := rawExec(warmSB); err != nil {
		return err
	}
	var cold, warm []time.Duration
	for i := 1; i < min(many, 21); i++ {
		sb, err := attach(i)
		if err != nil {
			return err
		}
		d, err := rawExec(sb)
		if err != nil {
			return err
		}
		cold = append(cold, d)
		if d, err = rawExec(warmSB); err != nil {
			return err
		}
		warm = append(warm, d)
	}
	fmt.Printf("### memory of idle local sessions\n\n")
	fmt.Printf("| measure | right after a command (init + idle worker) | idle past the trim (init alone) |\n|---|---|---|\n")
	fmt.Printf("| processes of one session | %d | %d |\n", busy.procs, idle.procs)
	fmt.Printf("| PSS of one session, of it anonymous (the rest is sbx's binary, shared by every process mapping it) | %.1f MB, %.1f MB | %.1f MB, %.1f MB |\n",
		float64(busy.one)/1e6, float64(busy.oneAnon)/1e6, float64(idle.one)/1e6, float64(idle.oneAnon)/1e6)
	fmt.Printf("| PSS of %d sessions (goal <= 6 MB each) | %.0f MB (**%.1f MB each**) | %.0f MB (**%.1f MB each**) |\n\n", many,
		float64(busy.sum)/1e6, float64(busy.sum)/float64(many)/1e6, float64(idle.sum)/1e6, float64(idle.sum)/float64(many)/1e6)
	fmt.Printf("| raw exec `/bin/bash -c true` (%d each, alternating) | median | p90 |\n|---|---|---|\n", len(cold))
	fmt.Printf("| into a warm sandbox (idle worker ready) | %s | %s |\n", ms(median(warm)), ms(pct(warm, 90)))
	fmt.Printf("| first command into a trimmed sandbox (worker started on demand) | %s | %s |\n", ms(median(cold)), ms(pct(cold, 90)))
	fmt.Printf("| cost of the on-demand start | +%s | |\n\n", ms(median(cold)-median(warm)))
	for i := range many {
		b.sbx("release", "--session", fmt.Sprintf("mem%02d", i))
	}
	return nil
}

// pssAnon sums the anonymous part of the PSS of pid and its descendants.
func pssAnon(pid int) int64 {
	var total int64
	var walk func(int)
	walk = func(p int) {
		total += smapsField(p, "Pss_Anon:")
		for _, c := range childrenOf(p) {
			walk(c)
		}
	}
	walk(pid)
	return total
}

func childrenOf(pid int) []int {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var kids []int
	for _, f := range strings.Fields(string(raw)) {
		k, _ := strconv.Atoi(f)
		kids = append(kids, k)
	}
	return kids
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// makeTree writes n files shaped like a repository with a node_modules: 60%
// source files of 1-8 KiB in directories of 20, 40% in small packages.
func makeTree(root string, n int) ([]string, error) {
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 8<<10)
	rng.Read(buf)
	var files []string
	for i := range n {
		var p string
		if i%5 < 3 {
			p = filepath.Join("src", fmt.Sprintf("pkg%03d", i/400), fmt.Sprintf("sub%02d", (i/20)%20), fmt.Sprintf("file%05d.go", i))
		} else {
			p = filepath.Join("node_modules", fmt.Sprintf("dep%04d", i/15), "lib", fmt.Sprintf("m%05d.js", i))
		}
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, buf[:1024+rng.Intn(7<<10)], 0o644); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	return files, nil
}

// age waits until the tree's newest write is past the racy window (the
// sync's 2 s, with a margin): what a user's tree is once it has sat.
func age() { time.Sleep(3 * time.Second) }

func edit(root string, files []string) error {
	for _, f := range files {
		fh, err := os.OpenFile(filepath.Join(root, f), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		fh.WriteString("// edited\n")
		fh.Close()
	}
	return nil
}

func run(dir string, name string, args ...string) (time.Duration, error) {
	c := exec.Command(name, args...)
	c.Dir = dir
	start := time.Now()
	out, err := c.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w: %.300s", name, strings.Join(args, " "), err, out)
	}
	return time.Since(start), nil
}

// interleave times a call on s and on the empty server alternately.
func (b *bench) interleave(s *server, n int) (tree, empty []time.Duration, err error) {
	for range n {
		d, _, err := s.bash("true")
		if err != nil {
			return nil, nil, err
		}
		tree = append(tree, d)
		d, _, err = b.empty.bash("true")
		if err != nil {
			return nil, nil, err
		}
		empty = append(empty, d)
	}
	return tree, empty, nil
}

// waitGone waits, up to a minute, until p no longer exists.
func waitGone(p string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still there a minute after its session's release", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEmpty waits until directory p has no entries (or is gone).
func waitEmpty(p string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ents, err := os.ReadDir(p)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && len(ents) == 0) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still holds %d entries a minute after the release", p, len(ents))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tree runs the tree rows at n files; with pushOnly, only the initial push.
func (b *bench) tree(n int, pushOnly bool) error {
	if _, err := b.emptyServer(); err != nil {
		return err
	}
	calls := b.n
	if n >= 100000 {
		calls = max(5, b.n/5)
	}
	root := filepath.Join(b.tmp, fmt.Sprintf("tree%d", n))
	files, err := makeTree(root, n)
	if err != nil {
		return err
	}
	age()
	fmt.Printf("### tree of %d files (%d calls per row unless said)\n\n", n, calls)
	fmt.Printf("| measure | sbx | baseline | ratio | goal |\n|---|---|---|---|---|\n")
	row := func(what string, d, base time.Duration, baseName, goal string) {
		fmt.Printf("| %s | %s | %s (%s) | **%.2fx** | %s |\n", what, ms(d), ms(base), baseName, ratio(d, base), goal)
	}

	// The initial push (a new session's first call) against tar,
	// alternately, b.pushes times (each a new session; the copies of one
	// pair kept until both ran, so neither pays for the other's deletions).
	var (
		s             *server
		dTars, dPushs []time.Duration
	)
	for k := range b.pushes {
		if s != nil {
			// The last session's release (its workspace removed) is done
			// before either side of the next pair runs.
			s.close()
			if err := waitGone(filepath.Join(b.sessionDir(s.name), "work")); err != nil {
				return err
			}
			// And its removal, which goes on after the release (the
			// workspace set aside in the trash beside the sessions).
			if err := waitEmpty(filepath.Join(b.state, "sbx", "sessions.trash")); err != nil {
				return err
			}
		}
		tarDir := filepath.Join(b.tmp, fmt.Sprintf("tar%d", n))
		os.MkdirAll(tarDir, 0o755)
		dTar, err := run(root, "/bin/sh", "-c", "tar cf - . | tar xf - -C "+tarDir)
		if err != nil {
			return err
		}
		s, err = b.start(fmt.Sprintf("tree%d-%d", n, k), root)
		if err != nil {
			return err
		}
		dPush, _, err := s.bash("true")
		if err != nil {
			return err
		}
		os.RemoveAll(tarDir)
		dTars, dPushs = append(dTars, dTar), append(dPushs, dPush)
	}
	row(fmt.Sprintf("initial push (first `bash true`, claim included) vs `tar c \\| tar x`, median of %d", b.pushes), median(dPushs), median(dTars), "tar", "throughput >= 0.5x: time <= 2x")
	if pushOnly {
		fmt.Printf("\npushes %v, tar %v\n\n", dPushs, dTars)
		s.close()
		os.RemoveAll(root)
		return nil
	}

	if _, err := s.times("true", 3); err != nil {
		return err
	}
	tr, em, err := b.interleave(s, calls)
	if err != nil {
		return err
	}
	goal := "<= 1.5x"
	if n >= 100000 {
		goal = "<= 2x"
	}
	row("no-change `bash true` vs the empty code dir", median(tr), median(em), "empty", goal)

	// One changed file per call.
	var one, em1 []time.Duration
	for i := range calls {
		if err := edit(root, files[i%len(files):i%len(files)+1]); err != nil {
			return err
		}
		d, _, err := s.bash("true")
		if err != nil {
			return err
		}
		one = append(one, d)
		d, _, err = b.empty.bash("true")
		if err != nil {
			return err
		}
		em1 = append(em1, d)
	}
	row("one file changed on the host, then `bash true`", median(one), median(em1), "empty", "<= empty + 5 ms")
	fmt.Printf("| (difference) | +%s | | | |\n", ms(median(one)-median(em1)))

	// 1,000 changed files, against moving those files with tar: five
	// rounds, each on 1,000 files of its own where the tree has them (a
	// single round varied 3x between runs), alternating with tar.
	if n >= 1000 {
		const k, rounds = 1000, 5
		var dSbx, dEmpty, dTar []time.Duration
		for r := range rounds {
			lo := (r * k) % (len(files) - k + 1)
			sel := files[lo : lo+k]
			if err := edit(root, sel); err != nil {
				return err
			}
			list := filepath.Join(b.tmp, "list")
			os.WriteFile(list, []byte(strings.Join(sel, "\n")+"\n"), 0o644)
			moveDir := filepath.Join(b.tmp, "move")
			os.MkdirAll(moveDir, 0o755)
			dMove, err := run(root, "/bin/sh", "-c", "tar cf - -T "+list+" | tar xf - -C "+moveDir)
			if err != nil {
				return err
			}
			os.RemoveAll(moveDir)
			d, _, err := s.bash("true")
			if err != nil {
				return err
			}
			de, _, _ := b.empty.bash("true")
			dSbx, dEmpty, dTar = append(dSbx, d), append(dEmpty, de), append(dTar, dMove)
		}
		de, dMove := median(dEmpty), median(dTar)
		row(fmt.Sprintf("1,000 files changed, then `bash true` (median of %d rounds)", rounds), median(dSbx), de+dMove, fmt.Sprintf("empty %s + tar of the 1,000 %s", ms(de), ms(dMove)), "<= empty + moving them")
		fmt.Printf("| (each round: sbx %s; tar %s) | | | | |\n", msList(dSbx), msList(dTar))
	}

	// 10% of the files edited and synced, aged, then no change again.
	tenth := files[:max(1, n/10)]
	if err := edit(root, tenth); err != nil {
		return err
	}
	if _, _, err := s.bash("true"); err != nil {
		return err
	}
	age()
	if _, err := s.times("true", 2); err != nil {
		return err
	}
	tr, em, err = b.interleave(s, calls)
	if err != nil {
		return err
	}
	row("no-change `bash true` after 10% were edited and synced", median(tr), median(em), "empty", goal)

	// The CLI: sbx exec --keep -- true against a stat walk of the tree,
	// without the host daemon (host_daemon = false: each call scans) and
	// with it (internal/hostd: the session's daemon watches the tree),
	// interleaved, and the same on an empty code dir.
	noDaemon := []string{"SBX_HOST_DAEMON=false"}
	cli, cliD := fmt.Sprintf("cli%d", n), fmt.Sprintf("clid%d", n)
	emptyCLI, emptyD := "cliempty", "cliemptyd"
	for _, c := range []struct {
		name, dir string
		env       []string
	}{{cli, root, noDaemon}, {cliD, root, nil}, {emptyCLI, b.empty.dir, noDaemon}, {emptyD, b.empty.dir, nil}} {
		if _, err := b.sbxEnv(c.env, "exec", "--keep", "--session", c.name, "--code-dir", c.dir, "--", "true"); err != nil {
			return err
		}
	}
	if err := b.waitDaemon(cliD); err != nil {
		return err
	}
	if err := b.waitDaemon(emptyD); err != nil {
		return err
	}
	var dc, dd, dw, de, ded []time.Duration
	for i := range calls + 2 {
		c, err := b.sbxEnv(noDaemon, "exec", "--keep", "--session", cli, "--code-dir", root, "--", "true")
		if err != nil {
			return err
		}
		w, err := run(root, "find", ".", "-printf", "%s %T@\n")
		if err != nil {
			return err
		}
		d, err := b.sbx("exec", "--keep", "--session", cliD, "--code-dir", root, "--", "true")
		if err != nil {
			return err
		}
		e, err := b.sbxEnv(noDaemon, "exec", "--keep", "--session", emptyCLI, "--code-dir", b.empty.dir, "--", "true")
		if err != nil {
			return err
		}
		ed, err := b.sbx("exec", "--keep", "--session", emptyD, "--code-dir", b.empty.dir, "--", "true")
		if err != nil {
			return err
		}
		if i >= 2 {
			dc, dd, dw, de, ded = append(dc, c), append(dd, d), append(dw, w), append(de, e), append(ded, ed)
		}
	}
	row("`sbx exec --keep -- true`, no change, no host daemon, vs a stat walk (`find -printf`)", median(dc), median(dw), "find", "<= 1.5x")
	row("the same vs `sbx exec --keep -- true` on an empty code dir, no host daemon", median(dc), median(de), "empty", "")
	row("`sbx exec --keep -- true`, no change, with the host daemon, vs the same on an empty code dir with it", median(dd), median(ded), "empty", "close")
	row("the same with the host daemon vs a stat walk", median(dd), median(dw), "find", "")

	// The sandbox deletes the whole tree (an agent's rm -rf before a
	// reinstall): the deletions are held for sbx accept, and every later
	// call's round trip sees them waiting.
	out, err := b.sbxOutput(nil, "exec", "--keep", "--session", cliD, "--code-dir", root, "--", "find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "sbx: held:") {
		return fmt.Errorf("the deletion of the whole tree was not held: %.500s", out)
	}
	var hd, hed []time.Duration
	for i := range calls + 2 {
		d, err := b.sbx("exec", "--keep", "--session", cliD, "--code-dir", root, "--", "true")
		if err != nil {
			return err
		}
		ed, err := b.sbx("exec", "--keep", "--session", emptyD, "--code-dir", b.empty.dir, "--", "true")
		if err != nil {
			return err
		}
		if i >= 2 {
			hd, hed = append(hd, d), append(hed, ed)
		}
	}
	row("`sbx exec --keep -- true` with the host daemon while the sandbox's deletion of the whole tree waits for `sbx accept`, vs an empty code dir's", median(hd), median(hed), "empty", "close")
	for _, name := range []string{cli, cliD, emptyCLI, emptyD} {
		b.sbx("release", "--session", name)
	}
	if _, err := b.sbx("accept", "--reject-deletions", "--session", cliD); err != nil {
		return err
	}
	s.close()

	// A repository cloned just before its session starts.
	if n <= 10000 {
		if _, err := run(root, "/bin/sh", "-c", "git init -q && git add -A && git -c user.email=b@b -c user.name=b commit -qm t"); err != nil {
			return err
		}
		clone := filepath.Join(b.tmp, fmt.Sprintf("clone%d", n))
		if _, err := run(b.tmp, "git", "clone", "-q", root, clone); err != nil {
			return err
		}
		c, err := b.start(fmt.Sprintf("clone%d", n), clone)
		if err != nil {
			return err
		}
		// The calls right after the first (the claim and the initial
		// push, untimed): a clone's files are seconds old then, and a scan
		// that took them for racy read them all.
		if _, _, err := c.bash("true"); err != nil {
			return err
		}
		tr, em, err = b.interleave(c, 3)
		if err != nil {
			return err
		}
		row("the 3 calls right after the first, in a repository cloned just before the session", median(tr), median(em), "empty", goal)
		fmt.Printf("| (each call: sbx %s; empty %s) | | | | |\n", msList(tr), msList(em))
		tr, em, err = b.interleave(c, calls)
		if err != nil {
			return err
		}
		row("no-change `bash true` in a repository cloned just before the session", median(tr), median(em), "empty", goal)
		c.close()
		os.RemoveAll(clone)
	}
	fmt.Println()
	os.RemoveAll(root)
	return nil
}

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// msList writes durations as one list in milliseconds, in their order.
func msList(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
	}
	return strings.Join(s, ", ") + " ms"
}
