package tools

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/portfwd"
	"github.com/sbx-sh/sbx/session"
)

// The port tool: sbx port for MCP clients. A dev server the agent started
// in the sandbox (bash with run_in_background) is reached from the host's
// 127.0.0.1 on a port the kernel picks. The agent never chooses the host
// port: a sandboxed command that could pick one could take a well-known
// port (5432, 6379) before the host's own service starts and receive what
// host clients send it; the user's own `sbx port` may pick any.

// MaxPortForwards bounds the port tool's forwards per session.
const MaxPortForwards = 16

// portGoneEvery is how often a forward looks at whether its session was
// closed.
const portGoneEvery = time.Second

// portTable is the port tool's live forwards, by sbx session name. Its own
// lock; never held across a forward's start or end.
type portTable struct {
	mu sync.Mutex
	m  map[string][]*forward // mu
}

// forward is one running portfwd.Forward.
type forward struct {
	sess        *session.Session
	addr        string // 127.0.0.1:port on the host
	sandboxPort int
	cancel      context.CancelFunc
	done        chan struct{} // closed when Forward has returned
}

func (f *forward) live() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// PortInput is the port tool's arguments.
type PortInput struct {
	SandboxPort int  `json:"sandbox_port,omitempty" jsonschema:"The port a server in the sandbox listens on (on 127.0.0.1 or 0.0.0.0 inside the sandbox). Omit it to list this session's forwards."`
	Stop        bool `json:"stop,omitempty" jsonschema:"Set to true to end the forward to sandbox_port instead of starting one."`
}

// PortForward is one forward as the port tool reports it.
type PortForward struct {
	URL         string `json:"url" jsonschema:"where the host reaches the sandbox's server: http://127.0.0.1:<host port>"`
	HostAddr    string `json:"host_addr" jsonschema:"the host address that forwards, always on 127.0.0.1"`
	SandboxPort int    `json:"sandbox_port" jsonschema:"the port inside the sandbox"`
}

// PortOutput is the session's forwards after the call.
type PortOutput struct {
	Forwards []PortForward `json:"forwards" jsonschema:"this session's forwards, after the call"`
}

// PortTool forwards a host loopback port to a port in the caller's sandbox.
func PortTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name: "port",
		Description: "Forwards a port of the host's 127.0.0.1 (chosen by the system) to a port inside this session's sandbox, so that the user's browser or tools on the host reach a dev server started in the sandbox (`npm run dev`, `go run ./cmd/server`). The sandbox itself gets no network. " +
			"Start the server first with bash and run_in_background: true (a server run in the foreground blocks the call until its timeout), then call port with its sandbox_port; the result gives the host URL. " +
			"A forward ends with the sandbox (release, idle timeout, end of the session) or with stop: true. Without sandbox_port, lists the forwards.",
		Annotations: &mcp.ToolAnnotations{Title: "Forward a port to the sandbox", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, p.port)
}

func (p *Sessions) port(ctx context.Context, req *mcp.CallToolRequest, in PortInput) (*mcp.CallToolResult, PortOutput, error) {
	if in.SandboxPort == 0 && in.Stop {
		return nil, PortOutput{}, errors.New("stop needs the sandbox_port whose forward to end (call port without arguments to list them)")
	}
	if in.SandboxPort < 0 || in.SandboxPort > 65535 {
		return nil, PortOutput{}, fmt.Errorf("sandbox_port %d is out of range (1 to 65535)", in.SandboxPort)
	}
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, PortOutput{}, err
	}
	defer c.done()
	name, sess := c.e.name, c.sess
	var msg string
	switch {
	case in.SandboxPort == 0:
		msg = "Forwards of this session:"
	case in.Stop:
		if !p.ports.stop(name, sess, in.SandboxPort) {
			return nil, PortOutput{}, fmt.Errorf("no forward to sandbox port %d in this session (call port without arguments to list them)", in.SandboxPort)
		}
		msg = fmt.Sprintf("Ended the forward to sandbox port %d.", in.SandboxPort)
	default:
		f, existed, err := p.ports.start(name, sess, in.SandboxPort, p.log)
		if err != nil {
			return nil, PortOutput{}, c.failed(err)
		}
		if existed {
			msg = fmt.Sprintf("Port %d of the sandbox was already forwarded: http://%s/.", in.SandboxPort, f.addr)
		} else {
			msg = fmt.Sprintf("Forwarding http://%s/ on the host to port %d in the sandbox; it ends with the sandbox or with port stop: true.", f.addr, in.SandboxPort)
		}
		if note := probe(ctx, f, sess); note != "" {
			msg += "\nNote: " + note
		}
	}
	out := PortOutput{Forwards: p.ports.list(name, sess)}
	var b strings.Builder
	b.WriteString(msg)
	if len(out.Forwards) == 0 {
		b.WriteString("\n(no forwards)")
	}
	for _, f := range out.Forwards {
		fmt.Fprintf(&b, "\n%s -> sandbox port %d", f.URL, f.SandboxPort)
	}
	return textResult(b.String() + notesText(c.notes)), out, nil
}

// probe says when nothing listens on the forward's sandbox port yet (the
// forward stays: the server may still be starting).
func probe(ctx context.Context, f *forward, sess *session.Session) string {
	pd, _, err := sess.PortDialer()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pd.DialPort(ctx, f.sandboxPort)
	if err != nil {
		return fmt.Sprintf("nothing answers on port %d in the sandbox yet (%v); the forward stays and connects once a server listens there (start it with bash and run_in_background: true)", f.sandboxPort, err)
	}
	conn.Close()
	return ""
}

// start begins a forward to sandboxPort in sess's sandbox, or returns the
// live one there is.
func (t *portTable) start(name string, sess *session.Session, sandboxPort int, log interface {
	Info(string, ...any)
}) (*forward, bool, error) {
	pd, dir, err := sess.PortDialer()
	if errors.Is(err, session.ErrNotClaimed) {
		return nil, false, errors.New("this session has no sandbox yet, so nothing listens there: start the server first with bash and run_in_background: true, then call port")
	}
	if err != nil {
		return nil, false, err
	}
	spec, err := portfwd.Parse("0:" + strconv.Itoa(sandboxPort))
	if err != nil {
		return nil, false, fmt.Errorf("sandbox_port %v", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	live := t.liveLocked(name, sess)
	for _, f := range live {
		if f.sandboxPort == sandboxPort {
			return f, true, nil
		}
	}
	if len(live) >= MaxPortForwards {
		return nil, false, fmt.Errorf("this session already has %d forwards, the most it may have: end one with port stop: true", MaxPortForwards)
	}
	fctx, cancel := context.WithCancel(context.Background())
	f := &forward{sess: sess, sandboxPort: sandboxPort, cancel: cancel, done: make(chan struct{})}
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		defer close(f.done)
		defer cancel()
		err := portfwd.Forward(fctx, pd, dir, spec, func(addr string) { ready <- addr }, func(format string, a ...any) {
			log.Info("port forward", "session", name, "sandbox_port", sandboxPort, "err", fmt.Sprintf(format, a...))
		})
		log.Info("port forward ended", "session", name, "sandbox_port", sandboxPort, "err", err)
		errc <- err
	}()
	// A kept session (persistent cluster claims) is closed, not released,
	// when its client goes or sbx-mcp stops: its sandbox stays, and the
	// forward must not outlive the session that asked for it.
	go func() {
		t := time.NewTicker(portGoneEvery)
		defer t.Stop()
		for {
			select {
			case <-f.done:
				return
			case <-t.C:
				if _, _, err := sess.PortDialer(); errors.Is(err, session.ErrClosed) {
					cancel()
					return
				}
			}
		}
	}()
	select {
	case f.addr = <-ready:
	case err := <-errc:
		if err == nil || errors.Is(err, portfwd.ErrSandboxGone) {
			err = errors.Join(portfwd.ErrSandboxGone, err)
		}
		return nil, false, err
	}
	if t.m == nil {
		t.m = map[string][]*forward{}
	}
	t.m[name] = append(live, f)
	return f, false, nil
}

// stop ends the forward to sandboxPort and waits for it to end.
func (t *portTable) stop(name string, sess *session.Session, sandboxPort int) bool {
	t.mu.Lock()
	var found *forward
	var keep []*forward
	for _, f := range t.liveLocked(name, sess) {
		if f.sandboxPort == sandboxPort {
			found = f
			continue
		}
		keep = append(keep, f)
	}
	t.m[name] = keep
	t.mu.Unlock()
	if found == nil {
		return false
	}
	found.cancel()
	<-found.done
	return true
}

// list is the live forwards of name's current session.
func (t *portTable) list(name string, sess *session.Session) []PortForward {
	t.mu.Lock()
	live := t.liveLocked(name, sess)
	t.m[name] = live
	t.mu.Unlock()
	out := []PortForward{}
	for _, f := range live {
		out = append(out, PortForward{URL: "http://" + f.addr, HostAddr: f.addr, SandboxPort: f.sandboxPort})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SandboxPort < out[j].SandboxPort })
	return out
}

// liveLocked is name's forwards that still run into sess's sandbox: one
// whose sandbox is gone has ended; one of an earlier session of the name is
// ended now.
func (t *portTable) liveLocked(name string, sess *session.Session) []*forward {
	if t.m == nil {
		t.m = map[string][]*forward{}
	}
	var live []*forward
	for _, f := range t.m[name] {
		switch {
		case !f.live():
		case f.sess != sess:
			f.cancel()
		default:
			live = append(live, f)
		}
	}
	return live
}
