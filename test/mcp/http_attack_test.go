package mcptest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
)

// TestHTTPRefusedConnectionsClosed: a local user without the token (or a
// web page whose request is refused for its Host or Origin) must not be
// able to make sbx-mcp keep a connection open. Answered and kept alive, a
// refused connection stayed open without end (the server has a header
// timeout, not an idle one): 5,000 of them, one request each, held 5,000
// sockets and goroutines of sbx-mcp for as long as the client liked, and
// nothing bounded their number but the process's descriptor limit. Each
// refusal now ends its connection; the server keeps serving.
func TestHTTPRefusedConnectionsClosed(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	addr := strings.TrimPrefix(strings.TrimSuffix(s.url, "/mcp"), "http://")
	_, port, _ := net.SplitHostPort(addr)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tc := range []struct{ name, req string }{
		{"no token", "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body},
		{"wrong token", "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer wrong-token-0123456789\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body},
		{"rebound host", "GET /mcp HTTP/1.1\r\nHost: evil.example:" + port + "\r\nAuthorization: Bearer " + testToken + "\r\n\r\n"},
		{"foreign origin", "GET /mcp HTTP/1.1\r\nHost: " + addr + "\r\nOrigin: https://evil.example\r\n\r\n"},
		{"another path", "GET /other HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"},
		{"the root", "GET / HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("status %d, want a refusal", resp.StatusCode)
			}
			// The server's header timeout is 10 s: waiting past it shows
			// the connection is not merely waiting for the next header.
			c.SetReadDeadline(time.Now().Add(12 * time.Second))
			n, err := br.Read(make([]byte, 1))
			if n != 0 || !errors.Is(err, io.EOF) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("refused (%d) and still open 12 s later: sbx-mcp keeps a connection for every refused client", resp.StatusCode)
				}
				t.Fatalf("after the refusal: read %d, %v; want the server's close", n, err)
			}
		})
	}
	t.Cleanup(func() { s.connect(t).bash("true") })
}

// TestHTTPRefusalLogBounded: every refused request (a wrong token, a
// foreign Host or Origin) was a line in sbx-mcp's log, which is the MCP
// client's log file: anyone who can reach the port could grow it as fast
// as it could send. One line, then at most one a minute, with the count.
func TestHTTPRefusalLogBounded(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	for i := 0; i < 300; i++ {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer wrong-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	// The server logs each before it answers; the lines cross a pipe to
	// the test: wait for the first, and for the last answered to be
	// written too (the log's own line for a later event).
	count := func() int { return strings.Count(s.stderr.String(), "http request refused") }
	if !testenv.WaitFor(10*time.Second, func() bool { return count() >= 1 }) {
		t.Fatalf("no log line for 300 refused requests:\n%.2000s", s.stderr.String())
	}
	s.connect(t).bash("true") // logged after every refusal's line
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(s.stderr.String(), "session opened") }) {
		t.Fatalf("no session line:\n%.2000s", s.stderr.String())
	}
	if n := count(); n < 1 || n > 2 {
		t.Fatalf("%d log lines for 300 refused requests, want 1 (or 2 across a minute):\n%.2000s", n, s.stderr.String())
	}
}

// TestHTTPHostSpellings: the DNS rebinding check against the spellings a
// page's name can take when it resolves to 127.0.0.1 (a trailing dot, a
// name under a wildcard DNS service, numeric forms browsers accept), all
// refused; the loopback addresses themselves served.
func TestHTTPHostSpellings(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	addr := strings.TrimPrefix(strings.TrimSuffix(s.url, "/mcp"), "http://")
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"localhost.:" + port, false},
		{"LOCALHOST:" + port, true},
		{"127.0.0.1.nip.io:" + port, false},
		{"127.1:" + port, false},
		{"0x7f.0.0.1:" + port, false},
		{"2130706433:" + port, false},
		{"0177.0.0.1:" + port, false},
		{"localhost", false}, // port 80, not this server's
		{"evil.localhost:" + port, false},
		{"[::1]:" + port, true},
		{"127.0.0.1:" + port, true},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+tc.host+"\r\nAuthorization: Bearer "+testToken+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatalf("Host %q: %v", tc.host, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		c.Close()
		refused := resp.StatusCode == http.StatusForbidden && strings.Contains(string(b), "DNS rebinding")
		if refused == tc.ok {
			t.Errorf("Host %q: %d %q, want refused %v", tc.host, resp.StatusCode, b, !tc.ok)
		}
	}
}
