//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/egress"
	"github.com/sbx-sh/sbx/sandbox"
)

// The egress path with allow_net. The sandbox keeps its own network
// namespace. Its init listens on EgressPort on the namespace's loopback; a
// host process of sbx's own (stage "egress", started by Claim) asks the init
// for the connections it accepts (each passed as a descriptor over the
// init's unix socket, so nothing listens on a host interface) and serves the
// egress proxy on them, dialling out from the host's network. The proxy
// process ends when the init does (its socket closes).

// EgressPort is the proxy's port on the sandbox's own loopback.
const EgressPort = 3128

// MaxEgressConns bounds the proxy connections one sandbox holds open on the
// host at once (each is a socket and a goroutine or two in the proxy's
// process); one past it is closed at once.
const MaxEgressConns = 512

// MaxEgressAudit bounds the session's audit.jsonl as far as the proxy's
// decisions go: each refused request is a line, and a sandbox can send
// thousands a second. Past it the proxy writes one line saying so and
// counts the rest (the count goes to its proxy.log when it ends).
const MaxEgressAudit = 64 << 20

// egressConfig is what the proxy process is told, over a pipe (the CA's key
// with it: never in a file).
type egressConfig struct {
	Name     string             `json:"name"`
	Socket   string             `json:"socket"`
	Audit    string             `json:"audit"`
	Allow    []string           `json:"allow"`
	Inject   []egress.Injection `json:"inject,omitempty"`
	CACert   []byte             `json:"ca_cert,omitempty"`
	CAKey    []byte             `json:"ca_key,omitempty"`
	Upstream string             `json:"upstream_roots,omitempty"`
	AuditMax int64              `json:"audit_max"`
}

// egressPlan is what Claim adds to a sandbox with allow_net.
type egressPlan struct {
	cfg    egressConfig
	env    []string
	mounts []sandbox.Mount
}

func egressDir(stateDir string) string { return filepath.Join(stateDir, "egress") }

// caBundlePaths are where TLS libraries look for the system's roots; those
// the host has as regular files get the bundle with the session CA added.
var caBundlePaths = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// sandboxCABundle is the bundle's path inside the sandbox, always there.
const sandboxCABundle = "/etc/sbx/ca-bundle.pem"

// planEgress checks the allowlist (each exact name must resolve: a typo is
// an error now, not a refusal later) and prepares the files and the
// variables of the sandbox.
func planEgress(ctx context.Context, eg *Egress, spec sandbox.Spec) (*egressPlan, error) {
	allow, err := egress.ParseAllowlist(eg.Allow)
	if err != nil {
		return nil, fmt.Errorf("allow_net: %w", err)
	}
	inj, err := egress.NewInjector(eg.Inject, allow)
	if err != nil {
		return nil, fmt.Errorf("inject: %w", err)
	}
	for _, r := range allow.Rules() {
		if r.Glob || r.Addr.IsValid() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, egress.ResolveTimeout)
		_, err := net.DefaultResolver.LookupNetIP(rctx, "ip", r.Host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("allow_net: %s does not resolve (%v): check the name in allow_net (your config, SBX_ALLOW_NET or --allow-net)", r.Host, err)
		}
	}
	dir := egressDir(spec.StateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	proxy := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	noProxy := "localhost,127.0.0.1,::1"
	plan := &egressPlan{
		cfg: egressConfig{Name: spec.Name, Socket: filepath.Join(spec.StateDir, "init.sock"), Audit: filepath.Join(spec.StateDir, "audit.jsonl"),
			Allow: eg.Allow, Inject: eg.Inject, AuditMax: eg.AuditMax},
		env: []string{"HTTPS_PROXY=" + proxy, "https_proxy=" + proxy, "HTTP_PROXY=" + proxy, "http_proxy=" + proxy,
			"NO_PROXY=" + noProxy, "no_proxy=" + noProxy},
	}
	if plan.cfg.AuditMax <= 0 {
		plan.cfg.AuditMax = MaxEgressAudit
	}
	if len(inj.Hosts()) == 0 {
		return plan, nil
	}
	ca, err := egress.NewCA(inj.Hosts())
	if err != nil {
		return nil, err
	}
	key, err := ca.MarshalKey()
	if err != nil {
		return nil, err
	}
	plan.cfg.CACert, plan.cfg.CAKey = ca.CertPEM(), key
	// The bundle: the host's roots and the session CA. A tool that insists
	// on a token of its own gets a placeholder from the user's config, not
	// the value, which the proxy sets.
	var roots []byte
	for _, p := range caBundlePaths {
		if b, err := os.ReadFile(p); err == nil {
			roots = b
			break
		}
	}
	bundle := filepath.Join(dir, "ca-bundle.pem")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(bundle, append(append(roots, '\n'), ca.CertPEM()...), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	plan.mounts = append(plan.mounts, sandbox.Mount{Source: bundle, Target: sandboxCABundle, ReadOnly: true},
		sandbox.Mount{Source: caFile, Target: "/etc/sbx/ca.pem", ReadOnly: true})
	for _, p := range caBundlePaths {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			plan.mounts = append(plan.mounts, sandbox.Mount{Source: bundle, Target: p, ReadOnly: true})
		}
	}
	plan.env = append(plan.env, "SSL_CERT_FILE="+sandboxCABundle, "REQUESTS_CA_BUNDLE="+sandboxCABundle, "CURL_CA_BUNDLE="+sandboxCABundle,
		"GIT_SSL_CAINFO="+sandboxCABundle, "PIP_CERT="+sandboxCABundle, "NODE_EXTRA_CA_CERTS=/etc/sbx/ca.pem")
	return plan, nil
}

// startEgress starts the proxy process for a served init and waits until
// it holds the init's egress stream.
func startEgress(ctx context.Context, plan *egressPlan, bin *os.File, stateDir string, timeout time.Duration) error {
	raw, err := json.Marshal(plan.cfg)
	if err != nil {
		return err
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	defer readyW.Close()
	logPath := filepath.Join(egressDir(stateDir), "proxy.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create the egress proxy's log: %w", err)
	}
	defer logFile.Close()
	// The host's environment: an inject value may be a host variable.
	// Claim has already decided which binary (stageFor).
	exe, extra, exeEnv := commandFor(bin, []*os.File{cfgR, readyW})
	env := append(append(os.Environ(), envStage+"=egress"), exeEnv...)
	cmd := &exec.Cmd{
		Path: exe, Args: []string{"sbx-egress", plan.cfg.Name}, Env: env, Dir: "/",
		Stderr: logFile, ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the egress proxy: %w", err)
	}
	go cmd.Wait()
	cfgR.Close()
	readyW.Close()
	if _, err := cfgW.Write(raw); err != nil {
		cmd.Process.Kill()
		return fmt.Errorf("configure the egress proxy: %w", err)
	}
	cfgW.Close()
	line, err := readLine(ctx, readyR, timeout)
	if err != nil || line != "ok" {
		cmd.Process.Kill()
		logged, _ := os.ReadFile(logPath)
		reason := strings.TrimPrefix(line, "error: ")
		if err != nil {
			reason = err.Error()
		}
		return fmt.Errorf("start the egress proxy: %s %s", reason, strings.TrimSpace(string(logged)))
	}
	return nil
}

// withEnv is env with the variables of extra set (replacing those names).
func withEnv(env, extra []string) []string {
	if len(extra) == 0 {
		return env
	}
	set := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// runEgress is the proxy process (stage "egress"), on the host.
func runEgress() int {
	ready := os.NewFile(4, "ready")
	fail := func(err error) int {
		fmt.Fprintf(ready, "error: %v\n", err)
		ready.Close()
		fmt.Fprintf(os.Stderr, "sbx egress: %v\n", err)
		return 1
	}
	raw, err := readAllFd(3)
	if err != nil {
		return fail(fmt.Errorf("read config: %w", err))
	}
	var cfg egressConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fail(fmt.Errorf("parse config: %w", err))
	}
	allow, err := egress.ParseAllowlist(cfg.Allow)
	if err != nil {
		return fail(err)
	}
	p := &egress.Proxy{Allow: allow}
	if len(cfg.Inject) > 0 {
		if p.Inject, err = egress.NewInjector(cfg.Inject, allow); err != nil {
			return fail(err)
		}
		if p.CA, err = egress.LoadCA(cfg.CACert, cfg.CAKey); err != nil {
			return fail(err)
		}
	}
	audit := &auditLog{path: cfg.Audit, session: cfg.Name, max: cfg.AuditMax}
	p.Audit = audit.write
	defer audit.close()
	c, err := net.Dial("unix", cfg.Socket)
	if err != nil {
		return fail(fmt.Errorf("connect to the sandbox init: %w", err))
	}
	ic := newConn(c.(*net.UnixConn))
	if err := ic.writeFrame(request{Op: "egress"}); err != nil {
		return fail(err)
	}
	var r reply
	if _, err := ic.readFrame(&r); err != nil || r.Error != "" || !r.Started {
		if err == nil {
			err = errors.New(r.Error)
		}
		return fail(fmt.Errorf("the sandbox init refused the egress stream: %w", err))
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	ln := &chanListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: c.LocalAddr()}
	var active atomic.Int64
	var over rareLog
	go p.Serve(ln)
	for {
		files, err := ic.readFrame(&r)
		if err != nil {
			// The init is gone: so is every sandbox process that could use
			// the proxy.
			ln.Close()
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "sbx egress: %v\n", err)
			return 0
		}
		for _, f := range files {
			conn, err := net.FileConn(f)
			f.Close()
			if err != nil {
				continue
			}
			if active.Add(1) > MaxEgressConns {
				active.Add(-1)
				conn.Close()
				over.note(fmt.Sprintf("over %d connections at once: refused", MaxEgressConns))
				continue
			}
			conn = &countedConn{Conn: conn, n: &active}
			select {
			case ln.ch <- conn:
			case <-ln.done:
				conn.Close()
			}
		}
	}
}

// auditLog appends the proxy's decisions to the session's audit.jsonl
// until the file is over max bytes; then it writes one line saying so and
// only counts. (Opened per line: the session writes the same file.)
type auditLog struct {
	path, session string
	max           int64

	mu      sync.Mutex
	full    bool
	dropped int64
	errs    rareLog
}

func (a *auditLog) write(d egress.Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.full {
		a.dropped++
		return
	}
	line, err := a.line(d)
	if err != nil {
		return
	}
	f, err := os.OpenFile(a.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		a.errs.note(fmt.Sprintf("audit log: %v", err))
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()+int64(len(line)) > a.max {
		a.full, a.dropped = true, 1
		line, err = a.line(egress.Decision{Time: d.Time, Kind: "audit", Reason: fmt.Sprintf(
			"audit.jsonl is over %d bytes: later egress decisions are not logged, only counted (in egress/proxy.log when the sandbox ends); the bound is local.MaxEgressAudit", a.max)})
		if err != nil {
			return
		}
	}
	f.Write(line)
}

func (a *auditLog) line(d egress.Decision) ([]byte, error) {
	line, err := json.Marshal(struct {
		Time    time.Time       `json:"time"`
		Session string          `json:"session"`
		Where   string          `json:"where"`
		Egress  egress.Decision `json:"egress"`
	}{d.Time, a.session, "egress", d})
	return append(line, '\n'), err
}

func (a *auditLog) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dropped > 0 {
		fmt.Fprintf(os.Stderr, "sbx egress: %d decisions not logged: audit.jsonl was over %d bytes\n", a.dropped, a.max)
	}
}

// rareLog writes a repeated message to stderr at most once a minute, with
// how many times it happened since: a sandbox can make it happen thousands
// of times a second, and the log is a file on the host.
type rareLog struct {
	mu   sync.Mutex
	last time.Time
	n    int
}

func (l *rareLog) note(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if time.Since(l.last) < time.Minute {
		return
	}
	fmt.Fprintf(os.Stderr, "sbx egress: %s (%d times since the last such line; at most one a minute)\n", msg, l.n)
	l.last, l.n = time.Now(), 0
}

// countedConn gives its place back once, when closed.
type countedConn struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite keeps half-close working through the wrapper (tunnels).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// chanListener is a net.Listener fed with connections.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// In the init: the proxy's listener on the sandbox's loopback.
var (
	egressMu       sync.Mutex
	egressListener net.Listener
	egressServing  bool
)

// listenEgress opens the proxy's port in the sandbox's namespace, before
// any command runs (so no command can take the port first).
func listenEgress(cfg initConfig) error {
	if cfg.EgressPort == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(cfg.EgressPort))
	if err != nil {
		return fmt.Errorf("listen on the sandbox's proxy port: %w", err)
	}
	egressListener = ln
	return nil
}

// serveEgress hands each connection to the proxy's port to the host's
// proxy process, one descriptor per frame, while that process listens.
func serveEgress(c *conn) {
	egressMu.Lock()
	if egressListener == nil || egressServing {
		egressMu.Unlock()
		msg := "this sandbox has no egress proxy (no allow_net)"
		if egressServing {
			msg = "the egress stream is already served"
		}
		c.writeFrame(reply{Done: true, Error: msg})
		return
	}
	egressServing = true
	egressMu.Unlock()
	defer func() {
		egressMu.Lock()
		egressServing = false
		egressMu.Unlock()
	}()
	if err := c.writeFrame(reply{Started: true}); err != nil {
		return
	}
	// The host side closing its end is seen by the next write; a
	// connection accepted meanwhile goes to the next proxy process.
	for {
		nc, err := egressListener.Accept()
		if err != nil {
			return
		}
		f, err := nc.(*net.TCPConn).File()
		nc.Close()
		if err != nil {
			continue
		}
		err = c.writeFrame(reply{}, f)
		f.Close()
		if err != nil {
			return
		}
	}
}
