package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Bounds of the proxy (docs/security.md, Bounds): a request's header, the
// time to send it, and how long a name may take to resolve or an upstream
// to answer a dial.
const (
	MaxHeaderBytes    = 64 << 10
	ReadHeaderTimeout = 30 * time.Second
	ResolveTimeout    = 10 * time.Second
	DialTimeout       = 30 * time.Second
	// An upstream's answer: its header (status line and fields) at most
	// MaxHeaderBytes, begun within ResponseHeaderTimeout (the default of
	// Proxy.ResponseHeaderTimeout), after at most MaxInterimResponses
	// interim (1xx) answers to one request.
	DefaultResponseHeaderTimeout = 5 * time.Minute
	MaxInterimResponses          = 10
	// MaxConnsPerClient bounds the connections one client address holds
	// open at once on a proxy shared by several (sbx proxy, for pods).
	MaxConnsPerClient = 512
	// MaxAuditField bounds a decision's Host and Reason (the sandbox names
	// the host; up to MaxHeaderBytes of it).
	MaxAuditField = 512
)

// Decision is one request the proxy judged, for the session's audit log.
type Decision struct {
	Time time.Time `json:"time"`
	// Kind is "connect" (a tunnel), "http" (a plain request forwarded) or
	// "inject" (a request inside a terminated tunnel, header added).
	Kind    string `json:"kind"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Allowed bool   `json:"allowed"`
	// Addr is the address dialled, when allowed.
	Addr   string `json:"addr,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Proxy is the allowlist proxy. Its zero value refuses everything; set
// Allow. It is an http.Handler: serve it with Serve.
type Proxy struct {
	Allow *Allowlist
	// Inject adds headers to requests to the hosts it lists, in tunnels it
	// terminates with CA (both needed).
	Inject *Injector
	CA     *CA
	// Audit receives every decision; nil drops them.
	Audit func(Decision)
	// HowToAllow ends a refusal's body, naming the ways to list a host
	// ("%s" is the host, or host:port); empty means DefaultHowToAllow.
	HowToAllow string
	// Resolve looks a name up; nil means the system resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial dials a checked address; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamRoots verifies the servers behind terminated tunnels; nil
	// means the host's roots.
	UpstreamRoots *x509.CertPool
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// header; 0 means DefaultResponseHeaderTimeout.
	ResponseHeaderTimeout time.Duration
}

// DefaultHowToAllow says how a user lists a host.
const DefaultHowToAllow = "to allow it, run sbx with --allow-net %[1]s, set SBX_ALLOW_NET=%[1]s, or add %[1]q to allow_net in your ~/.config/sbx/config.toml (a project's .sbx.toml cannot widen allow_net)"

// Refused is why a host may not be reached.
type Refused struct {
	Host   string
	Port   int
	Reason string
	// Allow is the allow_net entry that would allow it, when not the
	// host itself (a listed name refused for its address: that address).
	Allow string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("%s:%d refused: %s", e.Host, e.Port, e.Reason)
}

// Check decides whether host:port may be reached and returns the one
// address to dial. host is a name or an address literal as the request gave
// it.
func (p *Proxy) Check(ctx context.Context, host string, port int) (netip.AddrPort, error) {
	refuse := func(format string, args ...any) (netip.AddrPort, error) {
		return netip.AddrPort{}, &Refused{Host: host, Port: port, Reason: fmt.Sprintf(format, args...)}
	}
	if p.Allow == nil {
		return refuse("allow_net is empty")
	}
	if port < 1 || port > 65535 {
		return refuse("port %d is out of range", port)
	}
	lit := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(lit); err == nil {
		if a.Zone() != "" {
			return refuse("an address with a zone is never allowed")
		}
		a = a.Unmap()
		if !p.Allow.AllowsAddr(a, port) {
			return refuse("the address %s on port %d is not in allow_net (an address is allowed only when it is listed itself)", a, port)
		}
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	name, err := CanonicalName(host)
	if err != nil {
		return refuse("not a host name: %v", err)
	}
	if looksNumeric(name) {
		return refuse("not a host name or an address")
	}
	if !p.Allow.AllowsName(name, port) {
		return refuse("%s on port %d is not in allow_net", name, port)
	}
	rctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	resolve := p.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, h string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		}
	}
	addrs, err := resolve(rctx, name)
	if err != nil {
		return refuse("%s does not resolve: %v", name, err)
	}
	if len(addrs) == 0 {
		return refuse("%s has no address", name)
	}
	// Every address must pass, not just the one dialled: a name that
	// points at the host's own network is refused outright.
	var pick netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		refuse := func(format string, args ...any) (netip.AddrPort, error) {
			entry := a.String()
			if a.Is6() {
				entry = "[" + entry + "]"
			}
			if port != 80 && port != 443 {
				entry += ":" + strconv.Itoa(port)
			}
			return netip.AddrPort{}, &Refused{Host: host, Port: port, Reason: fmt.Sprintf(format, args...), Allow: entry}
		}
		if why := NotPublic(a); why != "" && !p.Allow.AllowsAddr(a, port) {
			return refuse("%s resolves to %s, %s, not a globally routable address (loopback, link-local, private, documentation, reserved, or one carrying such an address); a listed name may not lead into the host's own or any local network (list the address %s itself to allow it)", name, a, why, a)
		}
		if hostAddr(a) && !p.Allow.AllowsAddr(a, port) {
			return refuse("%s resolves to %s, an address of this host itself; a listed name may not lead to the host's own services (list the address %s itself to allow it)", name, a, a)
		}
		if !pick.IsValid() || (pick.Is6() && a.Is4()) {
			pick = a
		}
	}
	return netip.AddrPortFrom(pick, uint16(port)), nil
}

// hostAddr reports whether a is assigned to one of this host's interfaces
// (a public address of the host is as much the host's own network as its
// loopback: a service listening on 0.0.0.0 answers there), or carries one.
func hostAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: refuse
	}
	var own []netip.Addr
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(n.IP); ok {
				own = append(own, b)
			}
		}
	}
	return ownAddr(a, own)
}

// ownAddr reports whether a is one of own, or a NAT64, 6to4 or v4-mapped
// address carrying one of own's IPv4 addresses (through a NAT64 gateway or
// a 6to4 relay it reaches the host itself).
func ownAddr(a netip.Addr, own []netip.Addr) bool {
	cands := []netip.Addr{a.Unmap()}
	if a.Is6() && !a.Is4In6() {
		b := a.As16()
		if nat64.Contains(a) {
			cands = append(cands, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
		if sixToFour.Contains(a) {
			cands = append(cands, netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	for _, o := range own {
		for _, c := range cands {
			if o.Unmap() == c {
				return true
			}
		}
	}
	return false
}

func (p *Proxy) audit(d Decision) {
	if p.Audit != nil {
		d.Time = time.Now().UTC()
		d.Host, d.Reason = cut(d.Host), cut(d.Reason)
		p.Audit(d)
	}
}

func (p *Proxy) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	if p.Dial != nil {
		return p.Dial(dctx, "tcp", ap.String())
	}
	var d net.Dialer
	return d.DialContext(dctx, "tcp", ap.String())
}

// Serve serves the proxy on l until l fails.
func (p *Proxy) Serve(l net.Listener) error {
	srv := &http.Server{
		Handler: p, MaxHeaderBytes: MaxHeaderBytes, ReadHeaderTimeout: ReadHeaderTimeout,
		ErrorLog: nil,
	}
	return srv.Serve(l)
}

func (p *Proxy) refuse(w http.ResponseWriter, kind, host string, port int, err error) {
	p.audit(Decision{Kind: kind, Host: host, Port: port, Reason: err.Error()})
	how := p.HowToAllow
	if how == "" {
		how = DefaultHowToAllow
	}
	target := host
	if port != 80 && port != 443 {
		target = net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
	}
	var r *Refused
	reason := err.Error()
	if errors.As(err, &r) {
		reason = r.Reason
		if r.Allow != "" {
			target = r.Allow
		}
	}
	body := fmt.Sprintf("sbx egress proxy: refused %s to %s: %s; %s\n", strings.ToUpper(kind), net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)), reason, fmt.Sprintf(how, target))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Sbx-Refused", "1")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, body)
}

// ServeHTTP answers CONNECT with a tunnel and absolute-URL requests by
// forwarding them, each to an allowed host only.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "sbx egress proxy: only CONNECT and http:// requests through a proxy are served here (set HTTPS_PROXY/HTTP_PROXY, which sbx does)", http.StatusBadRequest)
		return
	}
	p.forward(w, r)
}

func splitTarget(hostport string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("want host:port, not %q", hostport)
		}
		return hostport, def, nil
	}
	port, err := parsePort(ps)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitTarget(r.Host, 0)
	if err != nil {
		p.refuse(w, "connect", r.Host, 0, err)
		return
	}
	ap, err := p.Check(r.Context(), host, port)
	if err != nil {
		p.refuse(w, "connect", host, port, err)
		return
	}
	up, err := p.dial(r.Context(), ap)
	if err != nil {
		p.audit(Decision{Kind: "connect", Host: host, Port: port, Addr: ap.String(), Reason: "dial failed: " + err.Error()})
		http.Error(w, fmt.Sprintf("sbx egress proxy: %s (%s) is allowed but could not be reached: %v", host, ap, err), http.StatusBadGateway)
		return
	}
	inject := p.Inject != nil && p.CA != nil && p.Inject.Has(host, port)
	p.audit(Decision{Kind: "connect", Host: host, Port: port, Allowed: true, Addr: ap.String(), Reason: map[bool]string{true: "tls terminated for inject", false: "tunnel"}[inject]})
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "sbx egress proxy: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	client.SetDeadline(time.Time{})
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		up.Close()
		return
	}
	var in io.Reader = client
	if n := buf.Reader.Buffered(); n > 0 {
		head, _ := buf.Reader.Peek(n)
		in = io.MultiReader(strings.NewReader(string(head)), client)
	}
	if inject {
		p.terminate(host, port, &prefixConn{Conn: client, r: in}, up)
		return
	}
	pipe(client, in, up)
}

// pipe copies both ways until either side ends, then closes both.
func pipe(client net.Conn, in io.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, in); closeWrite(up); done <- struct{}{} }()
	go func() { io.Copy(client, up); closeWrite(client); done <- struct{}{} }()
	<-done
	<-done
	client.Close()
	up.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}

// headerLimit reads at most n more bytes from r (n is reset per request).
type headerLimit struct {
	r io.Reader
	n int64
}

func (l *headerLimit) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// hopHeaders are not forwarded (RFC 9110 7.6.1), nor are the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHop deletes h's hop-by-hop fields: the fixed ones and every field
// that Connection (or the obsolete Proxy-Connection) names, which the
// sender meant for this hop only (RFC 9110 7.6.1). Done before the proxy
// adds a header of its own, so "Connection: Authorization" cannot take an
// injected header away, and a field listed there goes no further.
func removeHop(h http.Header) {
	for _, c := range []string{"Connection", "Proxy-Connection"} {
		for _, v := range h.Values(c) {
			for _, f := range strings.Split(v, ",") {
				if f = textproto.TrimString(f); f != "" {
					h.Del(f)
				}
			}
		}
	}
	for _, n := range hopHeaders {
		h.Del(n)
	}
}

func (p *Proxy) responseHeaderTimeout() time.Duration {
	if p.ResponseHeaderTimeout > 0 {
		return p.ResponseHeaderTimeout
	}
	return DefaultResponseHeaderTimeout
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitTarget(r.URL.Host, 80)
	if err != nil {
		p.refuse(w, "http", r.URL.Host, 0, err)
		return
	}
	ap, err := p.Check(r.Context(), host, port)
	if err != nil {
		p.refuse(w, "http", host, port, err)
		return
	}
	p.audit(Decision{Kind: "http", Host: host, Port: port, Allowed: true, Addr: ap.String()})
	out := r.Clone(r.Context())
	out.RequestURI = ""
	removeHop(out.Header)
	// The dial goes to the checked address, not to a name resolved again.
	timeout := p.responseHeaderTimeout()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dial(ctx, ap) },
		Proxy:       nil, DisableKeepAlives: true, ResponseHeaderTimeout: timeout,
		MaxResponseHeaderBytes: MaxHeaderBytes,
		// Transparent: no Accept-Encoding of the proxy's own, so no
		// decompression on the host (a small answer can inflate without end).
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(out)
	if err != nil {
		code, why := http.StatusBadGateway, err.Error()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			code, why = http.StatusGatewayTimeout, fmt.Sprintf("it did not answer within %s (%v)", timeout, err)
		}
		p.audit(Decision{Kind: "http", Host: host, Port: port, Allowed: true, Addr: ap.String(), Reason: "upstream: " + why})
		http.Error(w, fmt.Sprintf("sbx egress proxy: %s (%s) gave no usable answer: %s (an answer's header is bounded at %d bytes, its wait at %s)", host, ap, why, MaxHeaderBytes, timeout), code)
		return
	}
	defer resp.Body.Close()
	removeHop(resp.Header)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		// The answer broke off (the server closed early, a trailer over
		// the bound): end the sandbox's answer broken too, not with a
		// clean last chunk that would pass a truncated body for whole.
		p.audit(Decision{Kind: "http", Host: host, Port: port, Allowed: true, Addr: ap.String(), Reason: "upstream: the answer's body broke off: " + err.Error()})
		panic(http.ErrAbortHandler)
	}
}

// terminate serves HTTP inside a CONNECT tunnel to an inject host: TLS with
// a leaf of the session CA towards the sandbox, TLS verified against the
// real roots towards the host, the header added to each request.
func (p *Proxy) terminate(host string, port int, client net.Conn, up net.Conn) {
	defer client.Close()
	defer up.Close()
	name, _ := CanonicalName(host)
	leaf, err := p.CA.Leaf(name)
	if err != nil {
		p.audit(Decision{Kind: "inject", Host: host, Port: port, Reason: "cannot make a certificate: " + err.Error()})
		return
	}
	tc := tls.Server(client, &tls.Config{Certificates: []tls.Certificate{*leaf}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	client.SetDeadline(time.Now().Add(ReadHeaderTimeout))
	if err := tc.Handshake(); err != nil {
		return
	}
	client.SetDeadline(time.Time{})
	// The server's handshake is its first answer: bounded like one. If it
	// fails, the sandbox's first request gets the reason.
	uc := tls.Client(up, &tls.Config{ServerName: name, RootCAs: p.UpstreamRoots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	up.SetDeadline(time.Now().Add(p.responseHeaderTimeout()))
	upErr := uc.Handshake()
	up.SetDeadline(time.Time{})
	if upErr != nil {
		p.audit(Decision{Kind: "inject", Host: host, Port: port, Reason: "upstream TLS: " + upErr.Error()})
	}
	// Each request's header is read against MaxHeaderBytes, as the
	// server outside the tunnel does; its body is then unbounded (streamed).
	lr := &headerLimit{r: tc}
	cr := bufio.NewReader(lr)
	// The upstream's answers likewise (MaxHeaderBytes, begun within
	// ResponseHeaderTimeout, MaxInterimResponses interim ones): a hostile
	// or broken server must not make the host buffer without end.
	ul := &headerLimit{r: uc, n: 1 << 62}
	ur := bufio.NewReader(ul)
	authority := name
	if port != 443 {
		authority = net.JoinHostPort(name, strconv.Itoa(port))
	}
	for {
		tc.SetReadDeadline(time.Now().Add(5 * time.Minute))
		lr.n = MaxHeaderBytes
		req, err := http.ReadRequest(cr)
		if err != nil {
			if lr.n <= 0 {
				p.audit(Decision{Kind: "inject", Host: host, Port: port, Reason: fmt.Sprintf("request header over %d bytes", MaxHeaderBytes)})
			}
			return
		}
		lr.n = 1 << 62
		tc.SetReadDeadline(time.Time{})
		// The header goes to the host the tunnel was opened to, whatever
		// Host the request names.
		req.Host = authority
		// Hop-by-hop fields go before the header is set, so none of them
		// can name it away; trailers are dropped, so none can repeat it
		// after the body (a server that merges trailers into the header
		// would see the sandbox's value too).
		removeHop(req.Header)
		req.Trailer = nil
		if upErr != nil {
			p.failTunnel(tc, host, port, http.StatusBadGateway, fmt.Sprintf("TLS with %s failed (within %s, verified against the host's own roots): %v", name, p.responseHeaderTimeout(), upErr))
			return
		}
		if strings.EqualFold(req.Method, "TRACE") || strings.EqualFold(req.Method, "TRACK") {
			p.failTunnel(tc, host, port, http.StatusMethodNotAllowed, fmt.Sprintf("%s is refused inside a tunnel that adds a header: the server would echo the request back, the added header with it", req.Method))
			return
		}
		if err := p.Inject.Apply(name, port, req.Header); err != nil {
			p.failTunnel(tc, host, port, http.StatusBadGateway, err.Error())
			return
		}
		p.audit(Decision{Kind: "inject", Host: host, Port: port, Allowed: true, Reason: req.Method + " " + req.URL.Path})
		if err := req.Write(uc); err != nil {
			return
		}
		resp, code, err := p.readResponse(uc, ul, ur, req, tc)
		if err != nil {
			if code != 0 {
				p.failTunnel(tc, host, port, code, fmt.Sprintf("the answer of %s to %s %s: %v", name, req.Method, req.URL.Path, err))
			}
			return
		}
		removeHop(resp.Header)
		err = resp.Write(tc)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}

// readResponse reads the final answer to req from the upstream, passing
// each interim one (100 Continue, 103) on to the sandbox as it is: taken for
// the final one, it would pair every later response with the wrong request.
// Each header is read against MaxHeaderBytes and must begin within the
// response header timeout; at most MaxInterimResponses interim answers
// precede the final one. On an error, code is the status to answer the
// sandbox with (0: the sandbox's side failed, nothing to answer).
func (p *Proxy) readResponse(uc net.Conn, ul *headerLimit, ur *bufio.Reader, req *http.Request, tc io.Writer) (*http.Response, int, error) {
	timeout := p.responseHeaderTimeout()
	for n := 0; ; n++ {
		ul.n = MaxHeaderBytes
		uc.SetReadDeadline(time.Now().Add(timeout))
		resp, err := http.ReadResponse(ur, req)
		over := ul.n <= 0
		ul.n = 1 << 62
		uc.SetReadDeadline(time.Time{})
		if err != nil {
			var ne net.Error
			switch {
			case over:
				return nil, http.StatusBadGateway, fmt.Errorf("its header is over %d bytes (the proxy's bound on a response header)", MaxHeaderBytes)
			case errors.As(err, &ne) && ne.Timeout():
				return nil, http.StatusGatewayTimeout, fmt.Errorf("the server did not answer within %s", timeout)
			default:
				return nil, http.StatusBadGateway, fmt.Errorf("not a usable HTTP response: %v", err)
			}
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, 0, nil
		}
		if n >= MaxInterimResponses {
			return nil, http.StatusBadGateway, fmt.Errorf("over %d interim (1xx) answers to one request (the proxy's bound)", MaxInterimResponses)
		}
		if err := resp.Write(tc); err != nil {
			return nil, 0, err
		}
	}
}

// failTunnel audits why a request in a terminated tunnel got no answer from
// upstream and tells the sandbox, closing the tunnel after.
func (p *Proxy) failTunnel(tc io.Writer, host string, port, code int, why string) {
	p.audit(Decision{Kind: "inject", Host: host, Port: port, Reason: why})
	resp := &http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body: io.NopCloser(strings.NewReader("sbx egress proxy: " + why + "; the connection is closed\n")), Close: true}
	resp.Write(tc)
}

// cut shortens s to MaxAuditField bytes, saying so.
func cut(s string) string {
	if len(s) <= MaxAuditField {
		return s
	}
	const more = "...(cut)"
	return strings.ToValidUTF8(s[:MaxAuditField-len(more)], "") + more
}
