package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// startProxy serves p on a random loopback port and returns a client that
// uses it.
func startProxy(t *testing.T, p *Proxy, roots *x509.CertPool) *http.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go p.Serve(ln)
	pu, _ := url.Parse("http://" + ln.Addr().String())
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
}

type auditLog struct {
	mu sync.Mutex
	ds []Decision
}

func (a *auditLog) add(d Decision) { a.mu.Lock(); a.ds = append(a.ds, d); a.mu.Unlock() }
func (a *auditLog) all() []Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Decision(nil), a.ds...)
}

func mustAllow(t *testing.T, entries ...string) *Allowlist {
	t.Helper()
	a, err := ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func portOf(t *testing.T, u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Port()
}

func TestTunnelAllowedAndRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	port := portOf(t, srv.URL)
	var log auditLog
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	// Listed as an address: tunnelled.
	c := startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:"+port), Audit: log.add}, roots)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed CONNECT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("body through the tunnel = %q", body)
	}
	// The same address on another port: refused.
	c2 := startProxy(t, &Proxy{Allow: mustAllow(t, "127.0.0.1:1"), Audit: log.add}, roots)
	_, err = c2.Get(srv.URL)
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("unlisted port: want a 403 from the proxy, got %v", err)
	}
	ds := log.all()
	if len(ds) != 2 || !ds[0].Allowed || ds[1].Allowed || ds[0].Kind != "connect" || ds[1].Port == 0 {
		t.Fatalf("audit = %+v", ds)
	}
}

// refusalBody sends a raw CONNECT and returns the status line and body.
func refusalBody(t *testing.T, p *Proxy, target string) (int, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go p.Serve(ln)
	req, _ := http.NewRequest(http.MethodConnect, "http://"+target, nil)
	req.Host = target
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufioReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRefusalNamesHostAndHowToAllow(t *testing.T) {
	var log auditLog
	p := &Proxy{Allow: mustAllow(t, "*.allowed.example"), Audit: log.add}
	code, body := refusalBody(t, p, "evil.example:443")
	if code != http.StatusForbidden || !strings.Contains(body, "evil.example") || !strings.Contains(body, "--allow-net evil.example") || !strings.Contains(body, "allow_net") {
		t.Fatalf("refusal %d %q: want 403 naming the host and how to allow it", code, body)
	}
	if ds := log.all(); len(ds) != 1 || ds[0].Allowed || ds[0].Host != "evil.example" {
		t.Fatalf("audit = %+v", ds)
	}
	// The glob does not match its own apex.
	if code, _ := refusalBody(t, p, "allowed.example:443"); code != http.StatusForbidden {
		t.Fatalf("apex of a glob: %d, want 403", code)
	}
}

// A listed name whose address is the host's own (loopback here, by the real
// resolver) is refused until the address itself is listed.
func TestNameIntoHostNetworkRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inner") }))
	defer srv.Close()
	port := portOf(t, srv.URL)
	target := "http://localhost:" + port + "/"
	c := startProxy(t, &Proxy{Allow: mustAllow(t, "localhost:"+port)}, nil)
	resp, err := c.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "loopback") {
		t.Fatalf("name resolving to loopback: %d %q, want 403 saying why", resp.StatusCode, body)
	}
	c = startProxy(t, &Proxy{Allow: mustAllow(t, "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port)}, nil)
	resp, err = c.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "inner" {
		t.Fatalf("with the addresses listed: %d %q", resp.StatusCode, body)
	}
}

// The proxy resolves once and dials what it checked: a name that answers a
// public address to the check and loopback afterwards gets the first only.
func TestNoRebinding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	var mu sync.Mutex
	var lookups int
	var dialled []string
	p := &Proxy{
		Allow: mustAllow(t, "rebind.example"),
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			lookups++
			if lookups == 1 {
				return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, addr)
			mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	}
	c := startProxy(t, p, nil)
	resp, err := c.Get("http://rebind.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if lookups != 1 || len(dialled) != 1 || dialled[0] != "93.184.216.34:80" {
		t.Fatalf("lookups %d, dialled %v: want one lookup and the checked address dialled", lookups, dialled)
	}
	// And a name answering any private address among public ones is out.
	p2 := &Proxy{Allow: mustAllow(t, "mixed.example"), Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, nil
	}}
	if _, err := p2.Check(context.Background(), "mixed.example", 443); err == nil || !strings.Contains(err.Error(), "10.1.2.3") {
		t.Fatalf("mixed answer: %v", err)
	}
}

// inject: the header reaches the listed host only, inside a tunnel the
// proxy terminates with the session CA; the sandbox's placeholder is
// replaced; another host's tunnel stays opaque (its own certificate).
func TestInjectHeader(t *testing.T) {
	const secret = "s3cret-token-value"
	t.Setenv("SBX_TEST_INJECT_TOKEN", secret)
	var got sync.Map
	upstream, upRoots := localhostTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.URL.Path, r.Header.Get("Authorization"))
		fmt.Fprintf(w, "path %s", r.URL.Path)
	}))
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store("other", r.Header.Get("Authorization"))
	}))
	defer other.Close()
	port := portOf(t, upstream.URL)
	oport := portOf(t, other.URL)
	allow := mustAllow(t, "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port, "127.0.0.1:"+oport)
	inj, err := NewInjector([]Injection{{Host: "localhost", Port: atoi(port), Header: "Authorization", Prefix: "Bearer ", Env: "SBX_TEST_INJECT_TOKEN"}}, allow)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA(inj.Hosts())
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox trusts the session CA and the other server's own
	// certificate, nothing else.
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AppendCertsFromPEM(ca.CertPEM())
	sandboxRoots.AddCert(other.Certificate())
	var log auditLog
	c := startProxy(t, &Proxy{Allow: allow, Inject: inj, CA: ca, UpstreamRoots: upRoots, Audit: log.add}, sandboxRoots)
	req, _ := http.NewRequest("GET", "https://localhost:"+port+"/api", nil)
	req.Header.Set("Authorization", "Bearer placeholder")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if v, _ := got.Load("/api"); v != "Bearer "+secret {
		t.Fatalf("upstream saw Authorization %q, want the injected one", v)
	}
	if strings.Contains(string(body), secret) || strings.Contains(fmt.Sprint(resp.Header), secret) {
		t.Fatalf("the response carries the secret: %q %v", body, resp.Header)
	}
	if len(resp.TLS.PeerCertificates) == 0 || resp.TLS.PeerCertificates[len(resp.TLS.PeerCertificates)-1].Subject.CommonName != "sbx session CA (inject)" {
		t.Fatalf("the inject host's tunnel was not terminated by the session CA")
	}
	// Another host: opaque, no header, its own certificate.
	req, _ = http.NewRequest("GET", other.URL+"/x", nil)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, _ := got.Load("other"); v != "" {
		t.Fatalf("a host not in inject got Authorization %q", v)
	}
	if !resp.TLS.PeerCertificates[0].Equal(other.Certificate()) {
		t.Fatal("the other host's tunnel was terminated")
	}
	for _, d := range log.all() {
		if strings.Contains(fmt.Sprint(d), secret) {
			t.Fatalf("the audit log holds the secret: %+v", d)
		}
	}
	// The session CA cannot sign another name: its certificate's name
	// constraints forbid it, so a leaf for another host fails verification.
	leaf, err := ca.Leaf("bank.example")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := x509.ParseCertificate(leaf.Certificate[0])
	if _, err := x.Verify(x509.VerifyOptions{Roots: sandboxRoots, DNSName: "bank.example"}); err == nil {
		t.Fatal("the session CA's leaf for a host not in inject verifies")
	}
}

func TestInjectConfigErrors(t *testing.T) {
	allow := mustAllow(t, "api.example.com")
	for _, tc := range []struct {
		name string
		in   Injection
		want string
	}{
		{"host not allowed", Injection{Host: "other.example.com", Header: "Authorization", Env: "X"}, "not in allow_net"},
		{"bad header", Injection{Host: "api.example.com", Header: "Bad Header", Env: "X"}, "not a header name"},
		{"no value source", Injection{Host: "api.example.com", Header: "Authorization"}, "exactly one of env"},
		{"both value sources", Injection{Host: "api.example.com", Header: "Authorization", Env: "X", File: "/f"}, "exactly one of env"},
		{"port not allowed", Injection{Host: "api.example.com", Port: 8443, Header: "Authorization", Env: "X"}, "port 8443"},
	} {
		_, err := NewInjector([]Injection{tc.in}, allow)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// localhostTLS is an HTTPS server on 127.0.0.1 whose certificate names
// localhost, from a CA of its own (not the session's), and that CA's pool.
func localhostTLS(t *testing.T, h http.Handler) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	ca, err := NewCA([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("localhost")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	return srv, pool
}
