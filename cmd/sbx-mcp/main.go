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
	"strings"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/version"
	"github.com/sbx-sh/sbx/session"
	"github.com/sbx-sh/sbx/tools"
)

func versionString() string { return version.String() }

func main() {
	app.Main() // a sandbox init, an in-pod helper or a relay re-executes this binary
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

	tc, err := wire(codeDirs, *net, *idle, log)
	if err != nil {
		return fail(err)
	}
	tc.SDKLog = sdkLog
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *httpAddr == "" {
		err = serveStdio(ctx, tc, *sess, stdin, stdout)
	} else {
		err = serveHTTP(ctx, tc, *httpAddr, *tokenFile, stderr)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// serveStdio serves one connection, one session, on stdin and stdout.
func serveStdio(ctx context.Context, tc tools.Config, name string, stdin io.Reader, stdout io.Writer) error {
	if name == "" {
		var b [3]byte
		rand.Read(b[:])
		name = fmt.Sprintf("mcp-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	}
	if err := session.CheckName(name); err != nil {
		return err
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
		tc.Log.Error("release session", "session", name, "err", cerr)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// serveHTTP serves Streamable HTTP at addr, a session per client.
func serveHTTP(ctx context.Context, tc tools.Config, addr, tokenFile string, stderr io.Writer) error {
	token, explicit, err := loadToken(tokenFile)
	if err != nil {
		return err
	}
	host, _, err := netSplit(addr)
	if err != nil {
		return err
	}
	if !tools.IsLoopback(host) && !explicit {
		return fmt.Errorf("refusing to listen on %s, which is not a loopback address, without a token given explicitly: set SBX_TOKEN or pass --token-file", addr)
	}
	ln, err := listen(addr)
	if err != nil {
		return err
	}
	tc.Key = tools.HTTPKey
	pool := tools.NewSessions(tc)
	server := tools.NewServer(versionString(), pool)
	handler, err := tools.NewHTTPHandler(server, tools.HTTPOptions{
		Token: token, Addr: ln.Addr().String(), Log: tc.SDKLog,
		// The sandbox goes after idle_ttl; the MCP session, with whatever it
		// still holds, after a day of silence.
		SessionTimeout: 24 * time.Hour,
	})
	if err != nil {
		return err
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
		tc.Log.Error("release sessions", "err", cerr)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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

// wire builds the tools' configuration with the wiring sbx exec uses. A
// *config.Error (flags, config files) is the user's to fix before starting;
// anything else starts the server anyway, and the agent's client shows the
// reason on every call.
func wire(codeDirs []string, net bool, idle string, log *slog.Logger) (tools.Config, error) {
	e, err := app.Setup(app.Flags{CodeDirs: codeDirs, Net: net, IdleTTL: idle}, app.Server, log)
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		return tools.Config{}, err
	}
	if err != nil {
		var cdErr *app.CodeDirError
		if errors.As(err, &cdErr) {
			err = fmt.Errorf("%w (started in %s; pass --code-dir with the project's directory in the MCP server's configuration)", err, cdErr.Cwd)
		}
		log.Warn("no usable code dir: every tool call will fail", "err", err)
		return tools.Config{Log: log, Err: fmt.Errorf("sbx-mcp cannot run anything: %w", err)}, nil
	}
	return tools.Config{Manager: e.Manager, StartDir: e.StartDir, Log: log, Params: e.Params}, nil
}
