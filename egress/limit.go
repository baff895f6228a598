package egress

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// LimitConns wraps l so that a client address holding max open connections
// gets its next one answered "503" (naming the bound) and closed: on a
// proxy shared by several sandboxes (sbx proxy, for pods) one of them must
// not take every socket of the process.
func LimitConns(l net.Listener, max int) net.Listener {
	return &limitListener{Listener: l, max: max, open: map[netip.Addr]int{}}
}

type limitListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[netip.Addr]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var key netip.Addr // one key for addresses that are not IP (unix)
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			key = ap.Addr().Unmap()
		}
		l.mu.Lock()
		if l.open[key] >= l.max {
			l.mu.Unlock()
			go refuseConn(c, fmt.Sprintf("sbx egress proxy: %s holds %d connections at once, the bound for one client (egress.MaxConnsPerClient); close some and retry\n", key, l.max))
			continue
		}
		l.open[key]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() {
			l.mu.Lock()
			if l.open[key]--; l.open[key] <= 0 {
				delete(l.open, key)
			}
			l.mu.Unlock()
		}}, nil
	}
}

// refuseConn answers a connection over the bound without reading it.
func refuseConn(c net.Conn, msg string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Sbx-Refused: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
}

// limitedConn gives its place back once, when closed.
type limitedConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// CloseWrite keeps half-close working through the wrapper (tunnels).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
