package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestInjectTunnelHeaderBound: inside a tunnel the proxy terminates for
// inject, a request's header is bounded like any other (MaxHeaderBytes):
// a sandbox that sends a header without end is cut off, not buffered in
// the host's memory.
func TestInjectTunnelHeaderBound(t *testing.T) {
	t.Setenv("SBX_TEST_INJECT_TOKEN", "tok")
	upstream, upRoots := localhostTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	port := portOf(t, upstream.URL)
	allow := mustAllow(t, "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port)
	inj, err := NewInjector([]Injection{{Host: "localhost", Port: atoi(port), Header: "Authorization", Env: "SBX_TEST_INJECT_TOKEN"}}, allow)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA(inj.Hosts())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go (&Proxy{Allow: allow, Inject: inj, CA: ca, UpstreamRoots: upRoots}).Serve(ln)
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(raw, "CONNECT localhost:%s HTTP/1.1\r\nHost: localhost:%s\r\n\r\n", port, port)
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	tc := tls.Client(raw, &tls.Config{ServerName: "localhost", RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\nX-Long: ")); err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("a", 64<<10))
	const limit = 64 << 20
	for sent := 0; sent < limit; sent += len(chunk) {
		if _, err := tc.Write(chunk); err != nil {
			return // cut off
		}
	}
	t.Fatalf("the proxy read %d bytes of one header line inside an inject tunnel without cutting the connection (bound: %d)", limit, MaxHeaderBytes)
}
