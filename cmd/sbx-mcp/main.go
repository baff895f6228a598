// Command sbx-mcp is sbx's MCP server: bash, read, write, edit and release
// tools that run in a disposable sandbox, as drop-in replacements for a
// coding agent's own. Over stdio (the default) one connection is one sbx
// session; with --http each client gets its own. Nothing is claimed until the
// first tool call. Logs go to stderr only.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/internal/version"
	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
	"github.com/sbx-sh/sbx/tools"
)

func versionString() string { return version.String() }

func main() {
	local.Main() // a sandbox init re-executes this binary
	inpod.Main() // so does a remote sandbox's helper
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

const usage = `usage: sbx-mcp [flags]

An MCP server whose bash, read, write, edit and release tools run in a
disposable sandbox holding your code (see docs/mcp.md).

  claude mcp add sbx -- sbx-mcp
  sbx-mcp --http 127.0.0.1:8765        (token from SBX_TOKEN, --token-file, or printed)

flags:
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sbx-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	httpAddr := fs.String("http", "", "serve Streamable HTTP at `addr` (endpoint /mcp) instead of stdio")
	tokenFile := fs.String("token-file", "", "read the HTTP bearer token from `file`")
	net := fs.Bool("net", false, "share the host network with the sandbox (default: loopback only)")
	sess := fs.String("session", "", "session `name` for stdio (default: mcp-<pid>-<random>)")
	idle := fs.String("idle-ttl", "", "release a sandbox unused for this `duration` (default from config: 30m)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	var codeDirs multiFlag
	fs.Var(&codeDirs, "code-dir", "a code `dir` to sync with the sandbox (repeatable; default: the git top level, else the current directory)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sbx-mcp: error: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *httpAddr != "" && *sess != "" {
		fmt.Fprintf(stderr, "sbx-mcp: error: --session is for stdio: over HTTP every client gets its own session\n")
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "sbx-mcp %s\n", versionString())
		return 0
	}
	level := slog.LevelInfo
	if os.Getenv("SBX_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sdkLevel := slog.LevelWarn
	if level == slog.LevelDebug {
		sdkLevel = level
	}
	sdkLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: sdkLevel}))
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sbx-mcp: error: %v\n", err)
		return 1
	}

	cfg, startDir, codes, err := setup(codeDirs, *net, *idle)
	var hostCommands [][]string
	if err == nil {
		hostCommands, err = router.ParsePrefixes(cfg.HostCommands)
	}
	var mgr *session.Manager
	keep := false // a persistent cluster session is kept (see below)
	if err == nil {
		root, rerr := session.DefaultStateRoot()
		if rerr != nil {
			err = rerr
		} else {
			var prov sandbox.Provider = &local.Provider{Version: versionString()}
			if cfg.Backend == "cluster" {
				var ccfg cluster.Config
				if ccfg, err = cluster.LoadConfig(os.Getenv); err == nil {
					prov = cluster.New(ccfg, log)
					keep = ccfg.Persistent
				}
			}
			mgr = session.NewManager(root, prov, log)
		}
	}
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		// Flags and config files are the user's to fix before starting.
		return fail(err)
	}
	if err != nil {
		// Start anyway: the agent's client shows the reason on every call.
		log.Warn("no usable code dir: every tool call will fail", "err", err)
		err = fmt.Errorf("sbx-mcp cannot run anything: %w", err)
	}
	// A persistent cluster session survives a restart of this server: it is
	// kept when the connection ends, and reattached by its session name.
	tc := tools.Config{
		Manager: mgr, StartDir: startDir, Err: err, Log: log, SDKLog: sdkLog,
		Params: session.Params{
			CodeDirs: codes, Network: sandbox.Network(cfg.Network),
			Limits:  sandbox.Limits{MemoryBytes: cfg.Memory, Pids: cfg.Pids, DiskBytes: cfg.Disk},
			IdleTTL: cfg.IdleTTL, HostCommands: hostCommands, Exclude: cfg.Exclude, Keep: keep,
			ForwardEnv: cfg.ForwardEnv, EnvSkip: cfg.EnvSkip, SyncPaths: append(append([]string{}, cfg.SyncPaths...), cfg.TaskFiles...),
		},
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *httpAddr == "" {
		name := *sess
		if name == "" {
			var b [3]byte
			rand.Read(b[:])
			name = fmt.Sprintf("mcp-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
		}
		if err := session.CheckName(name); err != nil {
			return fail(err)
		}
		tc.DefaultName = name
		pool := tools.NewSessions(tc)
		server := tools.NewServer(versionString(), pool)
		// A client that stops reading must not kill sbx-mcp with SIGPIPE
		// before the calls in flight brought back what they changed: the
		// write fails instead, and the transport goes on.
		signal.Ignore(syscall.SIGPIPE)
		err := server.Run(ctx, &tools.StdioTransport{In: stdin, Out: stdout})
		// Pull back, then release, whatever ended the connection.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cerr := pool.Close(cctx); cerr != nil {
			log.Error("release session", "session", name, "err", cerr)
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return fail(err)
		}
		return 0
	}

	token, explicit, err := loadToken(*tokenFile)
	if err != nil {
		return fail(err)
	}
	host, _, err := netSplit(*httpAddr)
	if err != nil {
		return fail(err)
	}
	if !tools.IsLoopback(host) && !explicit {
		return fail(fmt.Errorf("refusing to listen on %s, which is not a loopback address, without a token given explicitly: set SBX_TOKEN or pass --token-file", *httpAddr))
	}
	ln, err := listen(*httpAddr)
	if err != nil {
		return fail(err)
	}
	tc.Key = tools.HTTPKey
	pool := tools.NewSessions(tc)
	server := tools.NewServer(versionString(), pool)
	handler, err := tools.NewHTTPHandler(server, tools.HTTPOptions{
		Token: token, Addr: ln.Addr().String(), Log: sdkLog,
		// The sandbox goes after idle_ttl; the MCP session, with whatever it
		// still holds, after a day of silence.
		SessionTimeout: 24 * time.Hour,
	})
	if err != nil {
		return fail(err)
	}
	if !explicit {
		fmt.Fprintf(stderr, "sbx-mcp: token: %s\n", token)
	}
	fmt.Fprintf(stderr, "sbx-mcp: listening on http://%s%s\n", ln.Addr(), tools.HTTPPath)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err = srv.Serve(ln)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cerr := pool.Close(cctx); cerr != nil {
		log.Error("release sessions", "err", cerr)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(err)
	}
	return 0
}

func netSplit(addr string) (string, string, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("--http %q: want host:port, such as 127.0.0.1:8765: %w", addr, err)
	}
	return h, p, nil
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// loadToken returns the bearer token and whether the user gave it (rather
// than it being generated now).
func loadToken(file string) (string, bool, error) {
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return "", false, fmt.Errorf("read token file: %w", err)
		}
		tok := strings.TrimSpace(string(raw))
		if len(tok) < 16 {
			return "", false, fmt.Errorf("token file %s holds a token of %d characters: use at least 16", file, len(tok))
		}
		return tok, true, nil
	}
	if tok := strings.TrimSpace(os.Getenv("SBX_TOKEN")); tok != "" {
		if len(tok) < 16 {
			return "", false, fmt.Errorf("SBX_TOKEN holds a token of %d characters: use at least 16", len(tok))
		}
		return tok, true, nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, err
	}
	return hex.EncodeToString(b[:]), false, nil
}

// setup works out the configuration and the code dirs as sbx exec does: the
// flags, else the config's code_dirs, else the git top level of the current
// directory, else the current directory.
func setup(codeDirFlags []string, net bool, idle string) (config.Config, string, []string, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return config.Defaults(), "", nil, fmt.Errorf("find the current directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	top := session.GitTop(cwd)
	cfg, err := config.LoadProject(cwd, top)
	if err != nil {
		return cfg, "", nil, err
	}
	if net {
		cfg.Network = "host"
	}
	if idle != "" {
		if err := cfg.Set("idle_ttl", idle); err != nil {
			return cfg, "", nil, &config.Error{Source: "flags", Key: "--idle-ttl", Msg: err.Error()}
		}
	}
	dirs := session.ChooseCodeDirs(codeDirFlags, cfg.CodeDirs, cwd)
	root, err := session.DefaultStateRoot()
	if err != nil {
		return cfg, "", nil, err
	}
	codes, err := session.ResolveCodeDirs(dirs, root)
	if err != nil {
		return cfg, "", nil, fmt.Errorf("%w (started in %s; pass --code-dir with the project's directory in the MCP server's configuration)", err, cwd)
	}
	start := codes[0]
	for _, d := range codes {
		if session.Within(cwd, d) {
			start = cwd
		}
	}
	return cfg, start, codes, nil
}
