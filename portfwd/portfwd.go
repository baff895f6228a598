// Package portfwd forwards a host loopback port to a port inside a sandbox
// (sbx port) and records the forwards a session has, for sbx ls.
//
// Promises: the host side listens on 127.0.0.1 only; each accepted
// connection becomes one connection the backend opens inside the
// sandbox's own network namespace; a forward ends with its sandbox, and
// its record with it.
package portfwd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec is a forward as the user writes it: HOSTPORT[:SANDBOXPORT].
type Spec struct {
	HostPort, SandboxPort int
}

// Parse reads HOSTPORT[:SANDBOXPORT]; SANDBOXPORT defaults to HOSTPORT,
// and HOSTPORT 0 means any free port (then SANDBOXPORT is required).
func Parse(s string) (Spec, error) {
	hs, ss, two := strings.Cut(s, ":")
	h, err := port(hs, true)
	if err != nil {
		return Spec{}, fmt.Errorf("%q: host port: %v (want HOSTPORT[:SANDBOXPORT], e.g. 8080 or 8080:3000)", s, err)
	}
	sp := h
	if two {
		if sp, err = port(ss, false); err != nil {
			return Spec{}, fmt.Errorf("%q: sandbox port: %v (want HOSTPORT[:SANDBOXPORT], e.g. 8080 or 8080:3000)", s, err)
		}
	} else if h == 0 {
		return Spec{}, fmt.Errorf("%q: host port 0 (any free port) needs a sandbox port: 0:3000", s)
	}
	return Spec{HostPort: h, SandboxPort: sp}, nil
}

func port(s string, zero bool) (int, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	n, _ := strconv.Atoi(s)
	if n > 65535 || n == 0 && !zero {
		return 0, fmt.Errorf("%d is out of range (1 to 65535)", n)
	}
	return n, nil
}

// Record is a running forward, kept in the session's state dir.
type Record struct {
	Pid         int       `json:"pid"`
	Host        string    `json:"host"` // 127.0.0.1:port
	SandboxPort int       `json:"sandbox_port"`
	Started     time.Time `json:"started"`
}

func dir(stateDir string) string { return filepath.Join(stateDir, "ports") }

func recordPath(stateDir string, hostPort int) string {
	return filepath.Join(dir(stateDir), strconv.Itoa(hostPort)+".json")
}

// List returns the session's live forwards, dropping the records of
// processes that are gone.
func List(stateDir string) []Record {
	ents, _ := os.ReadDir(dir(stateDir))
	var out []Record
	for _, e := range ents {
		p := filepath.Join(dir(stateDir), e.Name())
		raw, err := os.ReadFile(p)
		var r Record
		if err != nil || json.Unmarshal(raw, &r) != nil || !alive(r.Pid) {
			os.Remove(p)
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Summary is the forwards as sbx ls shows them ("8080->3000,9000"), or "".
func Summary(stateDir string) string {
	var parts []string
	for _, r := range List(stateDir) {
		_, hp, _ := net.SplitHostPort(r.Host)
		s := hp
		if hp != strconv.Itoa(r.SandboxPort) {
			s += "->" + strconv.Itoa(r.SandboxPort)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// Dialer opens a connection inside the sandbox and says when it is gone
// (sandbox.PortDialer).
type Dialer interface {
	DialPort(ctx context.Context, port int) (net.Conn, error)
	Wait(ctx context.Context) error
}

// Forward listens on 127.0.0.1:spec.HostPort and forwards each connection
// to spec.SandboxPort in the sandbox until ctx ends or the sandbox is gone.
// ready, when set, is called with the listening address once it listens.
// The session's record is written while it runs.
func Forward(ctx context.Context, d Dialer, stateDir string, spec Spec, ready func(addr string), logf func(format string, args ...any)) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(spec.HostPort)))
	if err != nil {
		return fmt.Errorf("listen on the host's 127.0.0.1:%d: %w (choose another host port)", spec.HostPort, err)
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	if err := os.MkdirAll(dir(stateDir), 0o700); err != nil {
		return err
	}
	rec := Record{Pid: os.Getpid(), Host: addr.String(), SandboxPort: spec.SandboxPort, Started: time.Now().UTC()}
	raw, _ := json.Marshal(rec)
	rp := recordPath(stateDir, addr.Port)
	if err := os.WriteFile(rp, raw, 0o600); err != nil {
		return err
	}
	defer os.Remove(rp)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := make(chan struct{})
	go func() {
		if d.Wait(ctx) == nil {
			close(gone)
		}
		cancel()
		ln.Close()
	}()
	if ready != nil {
		ready(addr.String())
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, MaxConns)
	var refused int
	var lastNote time.Time
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-gone:
				return ErrSandboxGone
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			if isTemporary(err) {
				// Out of descriptors (EMFILE, ENFILE): the forward
				// waits for some to be freed instead of ending.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
				continue
			}
			return err
		}
		select {
		case slots <- struct{}{}:
		default:
			// Past the bound: closed at once, so no number of host
			// clients can take the host process's descriptors.
			c.Close()
			refused++
			if logf != nil && time.Since(lastNote) > time.Minute {
				logf("%d connections refused: at most %d at once per forward (portfwd.MaxConns)", refused, MaxConns)
				lastNote, refused = time.Now(), 0
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer c.Close()
			sc, err := d.DialPort(ctx, spec.SandboxPort)
			if err != nil {
				if logf != nil {
					logf("%v", err)
				}
				return
			}
			defer sc.Close()
			stop := context.AfterFunc(ctx, func() { c.Close(); sc.Close() })
			defer stop()
			done := make(chan struct{}, 2)
			go func() { io.Copy(sc, c); closeWrite(sc); done <- struct{}{} }()
			go func() {
				// The sandbox side's error says why a connection ended
				// early (the cluster's port-forward: nothing listens).
				if _, err := io.Copy(c, sc); err != nil && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil && logf != nil {
					logf("%v", err)
				}
				closeWrite(c)
				done <- struct{}{}
			}()
			<-done
			// One side has ended its sending; the other gets
			// HalfCloseLinger to end its own, then both are closed.
			linger := time.NewTimer(HalfCloseLinger)
			defer linger.Stop()
			select {
			case <-done:
			case <-linger.C:
				c.Close()
				sc.Close()
				<-done
			}
		}()
	}
}

// MaxConns bounds the connections one forward holds at once: each holds
// two sockets of the host process (sbx port's, or sbx-mcp's for the port
// tool), and anyone who can connect to the host's loopback can open them;
// one past it is closed at once.
var MaxConns = 256

// isTemporary reports an Accept error that passes (out of descriptors).
func isTemporary(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// HalfCloseLinger is how long one side of a forwarded connection may stay
// open after the other ended its sending: a sandbox whose server never
// closes must not make the host keep a socket for every client that left.
var HalfCloseLinger = 30 * time.Second

// ErrSandboxGone means the forward ended because its sandbox did.
var ErrSandboxGone = errors.New("the session's sandbox is gone")

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}
