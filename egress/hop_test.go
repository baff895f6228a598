package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestForwardStripsConnectionNamed: on a plain http:// request the fields
// that Connection names are this hop's (RFC 9110 7.6.1): the proxy drops
// them both ways, as it drops Connection itself and Proxy-Authorization.
func TestForwardStripsConnectionNamed(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("X-Kept", "1")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := portOf(t, srv.URL)
	c := startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:"+port)}, nil)
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Header.Set("Connection", "X-Hop, X-Other-Hop")
	req.Header.Add("Proxy-Connection", "X-Proxy-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("X-Other-Hop", "1")
	req.Header.Set("X-Proxy-Hop", "1")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("X-Kept", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, h := range []string{"X-Hop", "X-Other-Hop", "X-Proxy-Hop", "Proxy-Authorization", "Connection", "Proxy-Connection"} {
		if v := seen.Get(h); v != "" && !(h == "Connection" && v == "close") {
			t.Errorf("the upstream got %s: %q (named in Connection, or hop-by-hop; only the proxy's own Connection: close may go)", h, v)
		}
	}
	if seen.Get("X-Kept") != "1" || resp.Header.Get("X-Kept") != "1" {
		t.Errorf("an end-to-end field was dropped: request %v, response %v", seen, resp.Header)
	}
	// The answer's way: a server (raw, as net/http's would replace its
	// Connection with "close") naming a field in Connection.
	rport, _ := rawUpstream(t, false, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Resp-Hop\r\nX-Resp-Hop: 1\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok")
	})
	c = startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:"+rport)}, nil)
	resp, err = c.Get("http://127.0.0.1:" + rport + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if v := resp.Header.Get("X-Resp-Hop"); v != "" || resp.Header.Get("X-Kept") != "1" || string(body) != "ok" {
		t.Errorf("the sandbox got the upstream's X-Resp-Hop %q (named in its Connection), X-Kept %q, body %q", v, resp.Header.Get("X-Kept"), body)
	}
}

// TestInjectedHeaderCannotBeRemovedOrRepeated: whatever the sandbox sends
// inside an inject tunnel, the upstream sees the injected header exactly
// once with the proxy's value: not named away by Connection, not doubled by
// the sandbox's own (in any case, repeated, folded), not repeated as a
// trailer after a chunked body; and a TRACE, which would echo it back, is
// answered by the proxy and never sent.
func TestInjectedHeaderCannotBeRemovedOrRepeated(t *testing.T) {
	type seenReq struct {
		path    string
		auth    []string
		trailer []string
	}
	var mu sync.Mutex
	var seen []seenReq
	upstream, roots := localhostTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenReq{r.URL.Path, r.Header.Values("Authorization"), r.Trailer.Values("Authorization")})
		mu.Unlock()
		if r.Method == "TRACE" {
			// What a server that supports TRACE does: the request back.
			w.Header().Set("Content-Type", "message/http")
			r.Header.Write(w)
			return
		}
		fmt.Fprintf(w, "path %s", r.URL.Path)
	}))
	for _, tc := range []struct{ name, req string }{
		{"own value", "GET /own HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer placeholder\r\n\r\n"},
		{"lower case, twice", "GET /twice HTTP/1.1\r\nHost: localhost\r\nauthorization: a\r\nAUTHORIZATION: b\r\n\r\n"},
		{"named in Connection", "GET /conn HTTP/1.1\r\nHost: localhost\r\nConnection: Authorization, keep-alive\r\n\r\n"},
		{"named in Proxy-Connection", "GET /pconn HTTP/1.1\r\nHost: localhost\r\nProxy-Connection: Authorization\r\n\r\n"},
		{"folded into another", "GET /fold HTTP/1.1\r\nHost: localhost\r\nX-A: v\r\n Authorization: fake\r\n\r\n"},
		{"as a trailer", "POST /trailer HTTP/1.1\r\nHost: localhost\r\nTrailer: Authorization\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nAuthorization: Bearer fake\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			conn, _ := injectTunnelAt(t, portOf(t, upstream.URL), roots, nil, 20*time.Second)
			io.WriteString(conn, tc.req)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode == http.StatusBadRequest && len(seen) == 0 {
				return // refused as malformed before the proxy: nothing reached the upstream
			}
			if len(seen) != 1 {
				t.Fatalf("the upstream saw %d requests (%+v), answer %d %q", len(seen), seen, resp.StatusCode, body)
			}
			if s := seen[0]; len(s.auth) != 1 || s.auth[0] != "tok" || len(s.trailer) != 0 {
				t.Fatalf("the upstream saw Authorization %q and as a trailer %q; want only the injected \"tok\"", s.auth, s.trailer)
			}
		})
	}
	t.Run("TRACE", func(t *testing.T) {
		mu.Lock()
		seen = nil
		mu.Unlock()
		conn, _ := injectTunnelAt(t, portOf(t, upstream.URL), roots, nil, 20*time.Second)
		io.WriteString(conn, "TRACE / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(string(body), "tok") || len(seen) != 0 || resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "TRACE") {
			t.Fatalf("TRACE in an inject tunnel: %d %q, the upstream saw %+v; want a 405 from the proxy and nothing sent", resp.StatusCode, body, seen)
		}
	})
}

// TestSmugglingThroughInjectTunnel: a request whose framing is ambiguous
// (Transfer-Encoding with Content-Length, two Content-Lengths, an obscured
// Transfer-Encoding) is either refused by the proxy or forwarded with the
// proxy's own framing: the upstream sees exactly the requests the proxy
// audited, each with the injected header once, and so never a request
// whose body swallowed the next one's injected header.
func TestSmugglingThroughInjectTunnel(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	upstream, roots := localhostTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s auth=%q", r.Method, r.URL.Path, r.Header.Values("Authorization")))
		mu.Unlock()
		io.ReadAll(r.Body)
		fmt.Fprintf(w, "path %s", r.URL.Path)
	}))
	// The last request closes the tunnel once answered, unless the
	// framing swallowed it.
	const next = "GET /next HTTP/1.1\r\nHost: localhost\r\n\r\nGET /last HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
	for _, tc := range []struct{ name, req string }{
		{"TE and CL", "POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 60\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /smuggled HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"},
		{"CL and TE", "POST /a HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n44\r\nPOST /smuggled HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nxxxxx\r\n0\r\n\r\n"},
		{"two CLs", "POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nContent-Length: 50\r\n\r\nPOST /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		{"TE folded", "POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"},
		{"TE chunked twice", "POST /a HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"},
		{"TE not chunked", "POST /a HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: xchunked\r\nContent-Length: 3\r\n\r\nabc"},
		{"bare LF", "POST /a HTTP/1.1\nHost: localhost\nContent-Length: 0\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			var log auditLog
			conn, _ := injectTunnelAt(t, portOf(t, upstream.URL), roots, &Proxy{Audit: log.add}, 20*time.Second)
			io.WriteString(conn, tc.req+next)
			br := bufio.NewReader(conn)
			var answers []string
			for {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				b, _ := io.ReadAll(resp.Body)
				answers = append(answers, fmt.Sprintf("%d %s", resp.StatusCode, b))
			}
			var audited []string
			for _, d := range log.all() {
				if d.Kind == "inject" && d.Allowed {
					audited = append(audited, d.Reason)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != len(audited) {
				t.Fatalf("the upstream saw %q; the proxy audited %q", seen, audited)
			}
			for i, s := range seen {
				if !strings.HasPrefix(s, audited[i]+" ") || !strings.Contains(s, `auth=["tok"]`) || strings.Contains(s, "/smuggled") && !strings.HasPrefix(s, "POST /smuggled") {
					t.Fatalf("upstream request %d %q against the audited %q", i, s, audited[i])
				}
			}
			if len(answers) < len(seen) {
				t.Fatalf("%d answers for %d upstream requests: %q", len(answers), len(seen), answers)
			}
		})
	}
}

// TestForwardUsesAbsoluteFormHost: a plain http:// request whose Host
// names another server than its absolute URL goes to the URL's server with
// that server's name as Host (RFC 9112 3.2.2): the Host line cannot pick a
// virtual host the allowlist did not check.
func TestForwardUsesAbsoluteFormHost(t *testing.T) {
	hosts := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hosts <- r.Host }))
	defer srv.Close()
	port := portOf(t, srv.URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go (&Proxy{Allow: mustAllow(t, "127.0.0.1:"+port)}).Serve(ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET http://127.0.0.1:%s/ HTTP/1.1\r\nHost: internal.unlisted.example\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case h := <-hosts:
		if h != "127.0.0.1:"+port {
			t.Fatalf("the upstream got Host %q, want the checked 127.0.0.1:%s", h, port)
		}
	default:
		t.Fatalf("the upstream got nothing; answer %d", resp.StatusCode)
	}
}

// TestForwardAddsNoEncoding: the proxy forwards what the sandbox asked: no
// "Accept-Encoding: gzip" of its own (net/http's Transport adds one and
// then decompresses on the host, so a small hostile answer became a large
// decompression on the host), and a compressed answer goes through as it is.
func TestForwardAddsNoEncoding(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Accept-Encoding")
		if r.Header.Get("Accept-Encoding") != "" {
			w.Header().Set("Content-Encoding", "gzip")
		}
		io.WriteString(w, "raw")
	}))
	defer srv.Close()
	port := portOf(t, srv.URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go (&Proxy{Allow: mustAllow(t, "127.0.0.1:"+port)}).Serve(ln)
	for _, ae := range []string{"", "gzip"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		req := "GET " + srv.URL + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n"
		if ae != "" {
			req += "Accept-Encoding: " + ae + "\r\n"
		}
		io.WriteString(c, req+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if seen := <-got; seen != ae || string(body) != "raw" || resp.Header.Get("Content-Encoding") != map[string]string{"": "", "gzip": "gzip"}[ae] {
			t.Fatalf("sandbox's Accept-Encoding %q: the upstream saw %q; the sandbox got %q with Content-Encoding %q", ae, seen, body, resp.Header.Get("Content-Encoding"))
		}
	}
}
