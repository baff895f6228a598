//go:build !linux

package inpod

import "net"

// peerIsUs relies on the socket's private directory where there is no
// SO_PEERCRED.
func peerIsUs(net.Conn) error { return nil }
