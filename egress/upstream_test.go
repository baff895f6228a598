package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The attacks of a hostile or broken upstream on the proxy's reads: each
// part of a response the proxy parses (status line and header, interim
// answers, the wait for a header) is bounded, and the sandbox is told why
// it got no answer.

// rawUpstream serves each connection to 127.0.0.1:port with serve (TLS with
// a localhost certificate when tlsOn), after reading the request's header;
// it returns the port and the certificate's roots.
func rawUpstream(t *testing.T, tlsOn bool, serve func(c net.Conn)) (string, *x509.CertPool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var pool *x509.CertPool
	if tlsOn {
		ca, err := NewCA([]string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := ca.Leaf("localhost")
		if err != nil {
			t.Fatal(err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*leaf}})
		pool = x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.CertPEM())
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				serve(c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, pool
}

// hugeHeader answers with a status line and a header of n bytes in one
// field, then a short body.
func hugeHeader(n int) func(c net.Conn) {
	return func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Long: ")
		chunk := strings.Repeat("a", 16<<10)
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
		io.WriteString(c, "\r\nContent-Length: 2\r\n\r\nok")
	}
}

// TestInjectTunnelResponseHeaderBound: inside an inject tunnel the
// upstream's response header is read against MaxHeaderBytes; past it the
// sandbox gets a 502 saying so, not a header the proxy buffered whole.
func TestInjectTunnelResponseHeaderBound(t *testing.T) {
	port, roots := rawUpstream(t, true, hugeHeader(1<<20))
	tc, _ := injectTunnelAt(t, port, roots, nil, 30*time.Second)
	io.WriteString(tc, "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("want a 502 from the proxy, got %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Long") != "" || !strings.Contains(string(body), "header") || !strings.Contains(string(body), fmt.Sprint(MaxHeaderBytes)) {
		t.Fatalf("a 1 MiB response header through the inject tunnel: %d, X-Long of %d bytes, body %q; want 502 naming the bound", resp.StatusCode, len(resp.Header.Get("X-Long")), body)
	}
}

// TestForwardResponseHeaderBound: the same for a plain http:// request.
func TestForwardResponseHeaderBound(t *testing.T) {
	port, _ := rawUpstream(t, false, hugeHeader(1<<20))
	c := startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:"+port)}, nil)
	resp, err := c.Get("http://127.0.0.1:" + port + "/big")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Long") != "" || !strings.Contains(string(body), fmt.Sprint(MaxHeaderBytes)) {
		t.Fatalf("a 1 MiB response header of a forwarded request: %d, X-Long of %d bytes, body %q; want 502 naming the bound", resp.StatusCode, len(resp.Header.Get("X-Long")), body)
	}
}

// TestInjectTunnelInterimBound: an upstream that answers "100 Continue"
// without end gets at most MaxInterimResponses of them passed on, then the
// sandbox gets a 502.
func TestInjectTunnelInterimBound(t *testing.T) {
	port, roots := rawUpstream(t, true, func(c net.Conn) {
		for {
			if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
		}
	})
	tc, _ := injectTunnelAt(t, port, roots, nil, 30*time.Second)
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	br := bufio.NewReader(tc)
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("after %d interim answers: %v, want a 502", n, err)
		}
		if resp.StatusCode >= 200 {
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway || n > MaxInterimResponses || !strings.Contains(string(body), "interim") {
				t.Fatalf("after %d interim answers: %d %q", n, resp.StatusCode, body)
			}
			return
		}
		if n > 10000 {
			t.Fatalf("the proxy passed on %d interim answers to one request (bound: %d)", n, MaxInterimResponses)
		}
	}
}

// TestInjectTunnelResponseHeaderTimeout: an upstream that never answers
// holds the tunnel (and one of the sandbox's connections on the host) for
// ResponseHeaderTimeout only, then the sandbox gets a 504.
func TestInjectTunnelResponseHeaderTimeout(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	port, roots := rawUpstream(t, true, func(c net.Conn) { <-hold })
	// Long enough for the server's TLS handshake (bounded by the same
	// timeout) on a loaded machine.
	tc, _ := injectTunnelAt(t, port, roots, &Proxy{ResponseHeaderTimeout: 2 * time.Second}, 20*time.Second)
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("an upstream that never answers: %v, want a 504 from the proxy", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "did not answer") {
		t.Fatalf("an upstream that never answers: %d %q", resp.StatusCode, body)
	}
}

// TestInjectTunnelUpstreamTLSFailure: when the proxy's TLS with the inject
// host fails (a server that never answers the handshake, or one whose
// certificate the host's roots do not verify), the sandbox's first request
// is answered with a 502 that says so, within the response header timeout,
// instead of a tunnel that hangs or ends without a word.
func TestInjectTunnelUpstreamTLSFailure(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	hold := make(chan struct{})
	defer close(hold)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			go func() { <-hold; c.Close() }()
		}
	}()
	_, sport, _ := net.SplitHostPort(silent.Addr().String())
	// A real TLS server whose roots the proxy is not given.
	untrusted, _ := localhostTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tc := range []struct {
		name, port, want string
		timeout          time.Duration
	}{
		{"silent", sport, "timeout", 300 * time.Millisecond},
		{"untrusted certificate", portOf(t, untrusted.URL), "certificate", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, _ := injectTunnelAt(t, tc.port, x509.NewCertPool(), &Proxy{ResponseHeaderTimeout: tc.timeout}, 20*time.Second)
			io.WriteString(conn, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v; want a 502 saying the TLS with the server failed", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "TLS") || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
		})
	}
}

// TestUpstreamTrailerBound: a chunked answer whose trailer is 1 MiB is cut
// (net/http reads a trailer block only within its 4 KiB buffer): the
// sandbox's read of that answer fails, and the trailer never reaches it,
// through a terminated tunnel or a forwarded request. And a forwarded
// answer the server cuts short ends broken for the sandbox too (it ended
// with a clean last chunk: a truncated download looked whole).
func TestUpstreamTrailerBound(t *testing.T) {
	trailer := func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Long\r\n\r\n2000\r\n"+strings.Repeat("b", 0x2000)+"\r\n0\r\nX-Long: ")
		chunk := strings.Repeat("a", 16<<10)
		for sent := 0; sent < 1<<20; sent += len(chunk) {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
		io.WriteString(c, "\r\n\r\n")
	}
	check := func(t *testing.T, resp *http.Response) {
		t.Helper()
		_, err := io.ReadAll(resp.Body)
		if err == nil || len(resp.Trailer.Get("X-Long")) > 4<<10 {
			t.Fatalf("a 1 MiB trailer: read error %v, trailer of %d bytes; want the read cut and no trailer", err, len(resp.Trailer.Get("X-Long")))
		}
	}
	t.Run("inject tunnel", func(t *testing.T) {
		port, roots := rawUpstream(t, true, trailer)
		tc, _ := injectTunnelAt(t, port, roots, nil, 30*time.Second)
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, resp)
	})
	t.Run("forwarded, cut short", func(t *testing.T) {
		port, _ := rawUpstream(t, false, func(c net.Conn) {
			// More than the proxy buffers, so its header goes out first.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\n"+strings.Repeat("b", 0x2000)+"\r\n")
		})
		c := startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:"+port)}, nil)
		resp, err := c.Get("http://127.0.0.1:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, err := io.ReadAll(resp.Body); err == nil {
			t.Fatalf("an answer the server cut short reached the sandbox whole-looking: %q", b)
		}
	})
	t.Run("forwarded", func(t *testing.T) {
		port, _ := rawUpstream(t, false, trailer)
		c := startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:"+port)}, nil)
		resp, err := c.Get("http://127.0.0.1:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		check(t, resp)
	})
}
