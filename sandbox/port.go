package sandbox

import (
	"context"
	"net"
)

// PortDialer is a Sandbox that can open a TCP connection to a port on its
// own loopback, from the host, without the sandbox having any network
// (sbx port). Not every backend has it.
type PortDialer interface {
	// DialPort connects to 127.0.0.1:port inside the sandbox.
	DialPort(ctx context.Context, port int) (net.Conn, error)
	// Wait returns when the sandbox is gone (nil) or ctx ends.
	Wait(ctx context.Context) error
}
