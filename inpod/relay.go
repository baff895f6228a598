package inpod

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The relay lets short-lived processes (one `sbx exec` per command) share
// one mux: a background process holds the mux and serves helper calls on a
// unix socket, so a command from a new process costs a socket round trip
// and a stream instead of a new exec into the pod.
//
// A connection starts with one line: "status" (answered by "ok" or
// "gone REASON", one line), or "call SUB-COMMAND..." (then the connection
// carries the helper's stdin and stdout exactly as a stream of the mux
// does, half-closed by each side when its input ends).

// RelayHooks connect a relay to its sandbox.
type RelayHooks struct {
	// Mux returns the mux to use, starting one when needed.
	Mux func(ctx context.Context) (*MuxClient, error)
	// Gone says why the sandbox can no longer serve, or "".
	Gone func() string
	// Called is told of each call as it starts (to renew the sandbox, to
	// stay alive); the function it returns is called when the call ends.
	Called func() (done func())
}

// ServeRelay serves connections on ln until it is closed.
func ServeRelay(ln net.Listener, h RelayHooks) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go serveRelayConn(c, h)
	}
}

func serveRelayConn(c net.Conn, h RelayHooks) {
	defer c.Close()
	if err := peerIsUs(c); err != nil {
		fmt.Fprintf(c, "refused: %v\n", err)
		return
	}
	line, err := readLine(c, 256)
	if err != nil {
		return
	}
	verb, rest, _ := strings.Cut(line, " ")
	switch verb {
	case "status":
		if why := h.Gone(); why != "" {
			fmt.Fprintf(c, "gone %s\n", strings.ReplaceAll(why, "\n", " "))
			return
		}
		io.WriteString(c, "ok\n")
	case "call":
		if _, err := muxSubcommand(rest); err != nil {
			return
		}
		if h.Called != nil {
			defer h.Called()()
		}
		m, err := h.Mux(context.Background())
		if err != nil {
			return // the caller sees the connection end without an exit frame
		}
		st, err := m.sess.OpenStream()
		if err != nil {
			return
		}
		defer st.Close()
		// The caller's connection is the call's stdin and stdout.
		converse(st, st.Close, rest, c, c)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}
}

// RelayStatus asks the relay at path whether its sandbox can serve: "" if
// it can, else why not. An error means no relay answered.
func RelayStatus(path string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "status\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("relay at %s: %w", path, err)
	}
	line = strings.TrimSuffix(line, "\n")
	if line == "ok" {
		return "", nil
	}
	if why, ok := strings.CutPrefix(line, "gone "); ok {
		return why, nil
	}
	return "", fmt.Errorf("relay at %s answered %q", path, line)
}

// RelayRun returns a StreamFunc that runs helper calls through the relay at
// path.
func RelayRun(path string) StreamFunc {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		line, err := helperLine(argv)
		if err != nil {
			return err
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return fmt.Errorf("reach the session's relay: %w", err)
		}
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		err = converse(c, c.(*net.UnixConn).CloseWrite, "call "+line, stdin, stdout)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("the session's relay: %w", err)
		}
		return nil
	}
}
