//go:build !linux

package hostd

import (
	"context"
	"io/fs"
	"net"
)

// supported: without SO_PEERCRED there is no daemon; every call scans.
const supported = false

func ownedByUs(fs.FileInfo) error        { return errUnsupported }
func peerUid(*net.UnixConn) (int, error) { return -1, errUnsupported }
func dialPrivate(context.Context, string, string) (*net.UnixConn, error) {
	return nil, errUnsupported
}
