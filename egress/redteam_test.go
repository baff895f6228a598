package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestInjectTunnelHeaderBound: inside a tunnel the proxy terminates for
// inject, a request's header is bounded like any other (MaxHeaderBytes):
// a sandbox that sends a header without end is cut off, not buffered in
// the host's memory.
func TestInjectTunnelHeaderBound(t *testing.T) {
	tc := injectTunnel(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 60*time.Second)
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

// TestNameToHostOwnAddressRefused: a listed name whose DNS points at one of
// this host's own interface addresses (a public one, which Public lets
// through) would reach every host service listening on 0.0.0.0.
func TestNameToHostOwnAddressRefused(t *testing.T) {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var own []netip.Addr
	for _, ia := range ifs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok && a.Zone() == "" {
				own = append(own, a.Unmap())
			}
		}
	}
	if len(own) == 0 {
		t.Fatal("this host has no interface address")
	}
	p := &Proxy{Allow: mustAllow(t, "api.example.com")}
	for _, a := range own {
		p.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) { return []netip.Addr{a}, nil }
		if ap, err := p.Check(context.Background(), "api.example.com", 443); err == nil {
			t.Errorf("api.example.com resolving to the host's own %s was allowed (dial %s)", a, ap)
		}
	}
}

// TestInjectTunnelInterimResponse: a "100 Continue" from the inject host is
// passed on and the final response follows for the same request, so
// pipelined requests keep their own answers.
func TestInjectTunnelInterimResponse(t *testing.T) {
	tc := injectTunnel(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // sends 100 Continue for Expect
		fmt.Fprintf(w, "path %s", r.URL.Path)
	}), 20*time.Second)
	io.WriteString(tc, "POST /one HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"+
		"GET /two HTTP/1.1\r\nHost: localhost\r\n\r\n")
	br := bufio.NewReader(tc)
	var err error
	for _, want := range []string{"path /one", "path /two"} {
		var r *http.Response
		for {
			r, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			if r.StatusCode >= 200 {
				break
			}
		}
		body, _ := io.ReadAll(r.Body)
		if string(body) != want {
			t.Fatalf("got %q, want %q", body, want)
		}
	}
}

// injectTunnel starts a proxy that injects a header for localhost (the
// upstream, a local HTTPS server serving h), opens a CONNECT to it as a
// sandbox would, and returns the TLS client inside the tunnel (trusting the
// session CA), the whole connection bounded by d.
func injectTunnel(t *testing.T, h http.Handler, d time.Duration) *tls.Conn {
	t.Helper()
	upstream, upRoots := localhostTLS(t, h)
	tc, _ := injectTunnelAt(t, portOf(t, upstream.URL), upRoots, nil, d)
	return tc
}

// injectTunnelAt is injectTunnel to an upstream already listening on
// 127.0.0.1:port whose certificate roots is; p, when not nil, is the
// proxy to configure (its Allow, Inject, CA and UpstreamRoots are set
// here). It returns the proxy too.
func injectTunnelAt(t *testing.T, port string, upRoots *x509.CertPool, p *Proxy, d time.Duration) (*tls.Conn, *Proxy) {
	t.Helper()
	t.Setenv("SBX_TEST_INJECT_TOKEN", "tok")
	if p == nil {
		p = &Proxy{}
	}
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
	t.Cleanup(func() { ln.Close() })
	p.Allow, p.Inject, p.CA, p.UpstreamRoots = allow, inj, ca, upRoots
	go p.Serve(ln)
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(d))
	fmt.Fprintf(raw, "CONNECT localhost:%s HTTP/1.1\r\nHost: localhost:%s\r\n\r\n", port, port)
	// Unbuffered: nothing may be read past the CONNECT answer, which the
	// TLS client reads next.
	resp, err := http.ReadResponse(bufio.NewReaderSize(oneByte{raw}, 16), &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	return tls.Client(raw, &tls.Config{ServerName: "localhost", RootCAs: roots}), p
}

// oneByte reads at most one byte per call.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// TestOwnAddrCarried: a NAT64 or 6to4 address that carries one of the
// host's own IPv4 addresses reaches the host through the gateway or relay,
// and counts as the host's own (own is a made-up public host address: this
// machine has none).
func TestOwnAddrCarried(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::1")}
	for _, tc := range []struct {
		addr string
		own  bool
	}{
		{"93.184.216.34", true},
		{"::ffff:93.184.216.34", true},
		{"64:ff9b::93.184.216.34", true},
		{"2002:5db8:d822::1", true},
		{"2606:2800:220:1::1", true},
		{"64:ff9b::93.184.216.35", false},
		{"2002:5db8:d823::1", false},
		{"8.8.8.8", false},
	} {
		if got := ownAddr(netip.MustParseAddr(tc.addr), own); got != tc.own {
			t.Errorf("ownAddr(%s) = %v, want %v", tc.addr, got, tc.own)
		}
	}
}

// TestCheckNameForms: the spellings a sandbox can give a target, against a
// name rule and a glob (these held; kept as regressions): case and one
// trailing dot are the same name, everything else that is not a plain
// ASCII host name is refused, never matched by a looser reading.
func TestCheckNameForms(t *testing.T) {
	p := &Proxy{Allow: mustAllow(t, "api.example.com", "*.cdn.example.com"), Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"api.example.com", true},
		{"API.Example.COM", true},
		{"api.example.com.", true},
		{"x.cdn.example.com", true},
		{"X.CDN.EXAMPLE.COM.", true},
		{"xn--bcher-kva.cdn.example.com", true}, // IDNA's ASCII form is a name like any other
		{"api.example.com..", false},
		{".api.example.com", false},
		{"cdn.example.com", false}, // a glob's apex
		{"api.example.com.evil.example", false},
		{"evilapi.example.com", false},
		{"x.evilcdn.example.com", false},
		{"api\uff0eexample\uff0ecom", false}, // fullwidth dots
		{"b\u00fccher.cdn.example.com", false},
		{"api.example.com\x00.evil", false},
		{"api.example.com%00", false},
		{"api.example.com ", false},
		{"*.cdn.example.com", false},
		{"a*.cdn.example.com", false},
		{"[api.example.com]", false},
		{"api.example.com%25eth0", false},
		{"[fe80::1%25eth0]", false},
		{"[fe80::1%eth0]", false},
		{"127.0.0.1.", false},
		{"0x7f000001", false},
		{"2130706433", false},
	} {
		_, err := p.Check(context.Background(), tc.host, 443)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want allowed=%v", tc.host, err, tc.ok)
		}
	}
}

// TestAuditFieldsBounded: what the sandbox names (a host of 30 KiB)
// goes to the audit log cut to MaxAuditField bytes, so a bounded audit log
// holds many decisions, not a few huge ones.
func TestAuditFieldsBounded(t *testing.T) {
	var log auditLog
	p := &Proxy{Allow: mustAllow(t, "api.example.com"), Audit: log.add}
	long := strings.Repeat("a", 30<<10) + ".example" // twice in the request: line and Host
	refusalBody(t, p, long+":443")
	ds := log.all()
	if len(ds) != 1 {
		t.Fatalf("audit: %+v, want one decision", ds)
	}
	if len(ds[0].Host) > MaxAuditField || len(ds[0].Reason) > MaxAuditField || !strings.HasPrefix(ds[0].Host, "aaaa") {
		t.Fatalf("audit of a 30 KiB host: %d decisions, host %d bytes, reason %d bytes (bound %d)", len(ds), len(ds[0].Host), len(ds[0].Reason), MaxAuditField)
	}
}

// TestRefusalOfLocalAddressSaysWhatToList: a listed name refused for its
// address tells the user to list that address, not the name (which is
// listed already).
func TestRefusalOfLocalAddressSaysWhatToList(t *testing.T) {
	p := &Proxy{Allow: mustAllow(t, "mirror.example"), Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil
	}}
	code, body := refusalBody(t, p, "mirror.example:443")
	if code != http.StatusForbidden || !strings.Contains(body, "--allow-net 192.0.2.10") || strings.Contains(body, "--allow-net mirror.example") || !strings.Contains(body, "documentation") {
		t.Fatalf("%d %q: want the address to list and why", code, body)
	}
	p = &Proxy{Allow: mustAllow(t, "mirror.example:8443"), Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("fd00::7")}, nil
	}}
	if _, body := refusalBody(t, p, "mirror.example:8443"); !strings.Contains(body, "--allow-net [fd00::7]:8443") {
		t.Fatalf("%q: want the bracketed address with its port", body)
	}
}
