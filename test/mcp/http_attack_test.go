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
