package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/egress"
)

// sbx proxy serves many pods at once: one client address that opens
// connection after connection holds at most egress.MaxConnsPerClient of
// them; the next is answered 503 saying so and closed, and another client
// address is still served.
func TestProxyCommandPerClientBound(t *testing.T) {
	w := newWorld(t)
	srv := newHelloServer(t)
	p := exec.Command(sbxBin, "proxy", "--listen", "127.0.0.1:0", "--allow-net", srv)
	p.Dir, p.Env = w.code, w.env
	out, _ := p.StdoutPipe()
	var stderr strings.Builder
	p.Stderr = &stderr
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Process.Kill(); p.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("sbx proxy said %q %q", line, stderr.String())
	}
	dialFrom := func(src string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", m[1])
		if err != nil {
			t.Fatalf("dial from %s: %v", src, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends one request on c and returns the status and body.
	get := func(c net.Conn) (int, string, error) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET http://"+srv+"/ HTTP/1.1\r\nHost: "+srv+"\r\n\r\n"); err != nil {
			return 0, "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), nil
	}
	// The held ones: each served once (so the proxy has accepted it).
	for i := 0; i < egress.MaxConnsPerClient; i++ {
		if code, body, err := get(dialFrom("127.0.0.1")); err != nil || code != 200 || body != "hello" {
			t.Fatalf("connection %d: %d %q %v", i+1, code, body, err)
		}
	}
	code, body, err := get(dialFrom("127.0.0.1"))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "127.0.0.1") || !strings.Contains(body, "connections") {
		t.Fatalf("connection %d from the same address: %d %q %v, want a 503 naming the bound", egress.MaxConnsPerClient+1, code, body, err)
	}
	if code, body, err := get(dialFrom("127.0.0.2")); err != nil || code != 200 || body != "hello" {
		t.Fatalf("another client address: %d %q %v, want it served", code, body, err)
	}
}
