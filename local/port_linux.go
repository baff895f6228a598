//go:build linux

package local

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// sbx port: the host asks the init to connect to a port on the sandbox's
// loopback and gets the connected socket's descriptor back, so the host
// reaches a dev server in the sandbox while the sandbox reaches nothing.

var _ sandbox.PortDialer = (*box)(nil)

// portDialTimeout bounds the init's connect to its own loopback.
const portDialTimeout = 5 * time.Second

// DialPort connects to 127.0.0.1:port inside the sandbox.
func (b *box) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range (1 to 65535)", port)
	}
	c, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	}
	if err := c.writeFrame(request{Op: "dial", Port: port}); err != nil {
		return nil, err
	}
	var r reply
	files, err := c.readFrame(&r)
	if err != nil {
		return nil, fmt.Errorf("connect to the sandbox's port %d: %w", port, err)
	}
	defer closeAll(files)
	if r.Error != "" {
		return nil, fmt.Errorf("connect to the sandbox's port %d: %s", port, r.Error)
	}
	if len(files) != 1 {
		return nil, fmt.Errorf("connect to the sandbox's port %d: the init sent %d descriptors", port, len(files))
	}
	return net.FileConn(files[0])
}

// Wait returns when the init is gone: it holds a connection the init
// never answers, which ends with the init.
func (b *box) Wait(ctx context.Context) error {
	c, err := b.dial(ctx)
	if err != nil {
		return nil // gone already
	}
	defer c.Close()
	if err := c.writeFrame(request{Op: "watch"}); err != nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		var r reply
		c.readFrame(&r)
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveDial, in the init: connect to the port on the sandbox's loopback.
func serveDial(c *conn, req *request) {
	if req.Port < 1 || req.Port > 65535 {
		c.writeFrame(reply{Done: true, Error: fmt.Sprintf("port %d is out of range", req.Port)})
		return
	}
	nc, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(req.Port), portDialTimeout)
	if err != nil {
		c.writeFrame(reply{Done: true, Error: fmt.Sprintf("nothing answers on port %d in the sandbox (%v): start the server there first, listening on 127.0.0.1 or 0.0.0.0", req.Port, err)})
		return
	}
	f, err := nc.(*net.TCPConn).File()
	nc.Close()
	if err != nil {
		c.writeFrame(reply{Done: true, Error: err.Error()})
		return
	}
	defer f.Close()
	c.writeFrame(reply{Done: true}, f)
}

// serveWatch, in the init: hold the connection until the client goes (or
// this process exits, which the client sees).
func serveWatch(c *conn) {
	var req request
	c.readFrame(&req)
}
