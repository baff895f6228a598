package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/sbx-sh/sbx/sandbox"
)

// sbx port on the cluster: each host connection is one stream of the
// helper's long-lived exec (inpod.MuxClient.Dial): the helper, inside the
// sandbox, connects to the port on its loopback, so it works under gVisor,
// whose network stack the kubelet's port-forward cannot reach (it dials the
// pod's network namespace from the node). Where no helper can run (the
// shell wrapper), a connection is one pods/portforward stream pair
// (client-go's SPDY dialer, as kubectl port-forward), which works under
// runc only and needs RBAC create on pods/portforward. Either way the pod
// gains no network: the API server and the kubelet carry the bytes.

var _ sandbox.PortDialer = (*Sandbox)(nil)

// portGoneEvery is how often Wait looks at whether the claim's watch found
// the sandbox gone.
const portGoneEvery = time.Second

// DialPort connects to 127.0.0.1:port in the pod.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range (1 to 65535)", port)
	}
	if why := s.goneReason(); why != "" {
		return nil, fmt.Errorf("%w: %s", sandbox.ErrLost, why)
	}
	m, err := s.helperMux(ctx)
	if err == nil {
		return m.Dial(ctx, port)
	}
	if !errors.Is(err, errNoHelperBinary) {
		return nil, err
	}
	return s.dialPortForward(ctx, port)
}

// dialPortForward connects to 127.0.0.1:port in the pod through the
// kubelet's port-forward (runc pods only; see above).
func (s *Sandbox) dialPortForward(ctx context.Context, port int) (net.Conn, error) {
	a, err := s.api(ctx)
	if err != nil {
		return nil, err
	}
	if a.rest == nil {
		return nil, errors.New("port forward: no REST config")
	}
	u := a.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.ns).Name(s.pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(a.rest)
	if err != nil {
		return nil, err
	}
	conn, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("port forward to pod %s/%s port %d: %w (the role needs create on pods/portforward)", s.ns, s.pod, port, err)
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port forward to pod %s/%s port %d: %w", s.ns, s.pod, port, err)
	}
	errStream.Close() // nothing is written to it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port forward to pod %s/%s port %d: %w", s.ns, s.pod, port, err)
	}
	c := &pfConn{conn: conn, data: data, port: port, errDone: make(chan struct{})}
	go func() {
		// At most a line from the kubelet ("connection refused"); bounded.
		msg, _ := io.ReadAll(io.LimitReader(errStream, 4096))
		c.mu.Lock()
		c.remoteErr = strings.TrimSpace(string(msg))
		c.mu.Unlock()
		close(c.errDone)
	}()
	return c, nil
}

// Wait returns when the claim's watch finds the sandbox gone or it was
// released.
func (s *Sandbox) Wait(ctx context.Context) error {
	s.ensureWatch()
	t := time.NewTicker(portGoneEvery)
	defer t.Stop()
	for {
		s.mu.Lock()
		done := s.released || s.gone != ""
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// pfConn is one forwarded connection: the data stream, with the error
// stream's message as the read error when the pod side failed.
type pfConn struct {
	conn      io.Closer // the SPDY connection
	data      pfStream
	port      int
	errDone   chan struct{}
	mu        sync.Mutex
	remoteErr string // mu
	closeOnce sync.Once
}

func (c *pfConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err == io.EOF {
		// The error stream ends with the data stream; its message, if
		// any, says why (nothing listens on the port in the pod).
		select {
		case <-c.errDone:
		case <-time.After(time.Second):
		}
		c.mu.Lock()
		msg := c.remoteErr
		c.mu.Unlock()
		if msg != "" {
			return n, fmt.Errorf("connect to the sandbox's port %d: %s (nothing listens on it in the pod's network namespace; under gVisor (runsc) a server's port is inside the sandbox's own network stack, which the kubelet's port-forward does not reach: see docs/cluster.md)", c.port, msg)
		}
	}
	return n, err
}

func (c *pfConn) Write(p []byte) (int, error) { return c.data.Write(p) }

// CloseWrite tells the pod side that nothing more comes (portfwd calls it).
func (c *pfConn) CloseWrite() error { return c.data.Close() }

func (c *pfConn) Close() error {
	c.closeOnce.Do(func() {
		c.data.Reset()
		c.conn.Close()
	})
	return nil
}

// pfStream is what pfConn uses of an httpstream.Stream.
type pfStream interface {
	io.ReadWriteCloser
	Reset() error
}

type pfAddr string

func (a pfAddr) Network() string { return "portforward" }
func (a pfAddr) String() string  { return string(a) }

func (c *pfConn) LocalAddr() net.Addr  { return pfAddr("sbx") }
func (c *pfConn) RemoteAddr() net.Addr { return pfAddr("pod:" + strconv.Itoa(c.port)) }

// Deadlines are not supported by the streams; portfwd ends a connection by
// closing it.
func (c *pfConn) SetDeadline(time.Time) error      { return nil }
func (c *pfConn) SetReadDeadline(time.Time) error  { return nil }
func (c *pfConn) SetWriteDeadline(time.Time) error { return nil }
