// Package mcpserver is sbx-mcp past its flags: the wiring into tools.Config
// (internal/app's, as sbx exec's), then one MCP connection on stdio (one
// session) or Streamable HTTP (a session per client), and the release of
// every session when the connection or the server ends. Logs go to stderr
// only: over stdio, stdout is the protocol's.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// Options are sbx-mcp's flags.
type Options struct {
	HTTP      string   // --http: serve Streamable HTTP at this address instead of stdio
	TokenFile string   // --token-file: the HTTP bearer token's file
	Net       bool     // --net: share the host network
	Session   string   // --session: the stdio session's name
	IdleTTL   string   // --idle-ttl
	CodeDirs  []string // --code-dir, repeatable
	AllowNet  []string // --allow-net, repeatable; nil: the config's allow_net
}

// Run serves MCP as o says until the connection ends (stdio) or a signal
// stops it, and returns the exit status: 1 when it could not serve.
func Run(o Options, stdin io.Reader, stdout, stderr io.Writer) int {
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

	tc, err := wire(o, log)
	if err != nil {
		return fail(err)
	}
	tc.SDKLog = sdkLog
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.HTTP == "" {
		err = serveStdio(ctx, tc, o.Session, stdin, stdout)
	} else {
		err = serveHTTP(ctx, tc, o.HTTP, o.TokenFile, stderr)
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
	server := tools.NewServer(version.String(), pool)
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
	server := tools.NewServer(version.String(), pool)
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
func wire(o Options, log *slog.Logger) (tools.Config, error) {
	e, err := app.Setup(app.Flags{CodeDirs: o.CodeDirs, Net: o.Net, IdleTTL: o.IdleTTL, AllowNet: o.AllowNet}, app.Server, log)
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
