// Package egress is the sandbox's one way out when allow_net is set: an
// HTTP(S) proxy that runs on the host and lets through only the hosts and
// ports the user listed.
//
// Promises: a CONNECT or plain HTTP request reaches a host only when a rule
// allows its name (or its address, for an address rule) and port; a name
// whose addresses include a loopback, link-local, private or otherwise
// non-public one is refused unless that address is itself listed; the
// address the proxy dials is the one it checked (it never resolves twice,
// so a rebinding name gets nothing). Every decision goes to the Audit
// callback. A refusal is an HTTP 403 whose body names the host and says how
// to allow it. Only hosts listed in Inject have their TLS terminated (with a
// per-session CA whose key stays in this process); every other CONNECT is an
// opaque tunnel.
package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Rule is one allow_net entry: a host name, a glob "*.example.com" (any
// name below example.com, not example.com itself) or an address, with a
// port or, when Port is 0, the ports 80 and 443.
type Rule struct {
	// Host is a lower-case name without a trailing dot; for a glob, the
	// suffix after "*." (Glob set). Empty for an address rule.
	Host string
	Glob bool
	// Addr is set for an address rule ("10.0.0.5", "[::1]:8080").
	Addr netip.Addr
	Port int
}

// DefaultPorts are the ports a rule without one allows.
var DefaultPorts = []int{80, 443}

func (r Rule) String() string {
	h := r.Host
	if r.Glob {
		h = "*." + h
	}
	if r.Addr.IsValid() {
		h = r.Addr.String()
		if r.Addr.Is6() {
			h = "[" + h + "]"
		}
	}
	if r.Port != 0 {
		h += ":" + strconv.Itoa(r.Port)
	}
	return h
}

// ParseRule reads one allow_net entry.
func ParseRule(s string) (Rule, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, fmt.Errorf("empty entry (want a host such as \"example.com\", \"*.example.com\" or \"10.0.0.5:8080\")")
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Rule{}, fmt.Errorf("%q: unclosed \"[\" (an IPv6 address is written [::1] or [::1]:8080)", in)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return Rule{}, fmt.Errorf("%q: want \":port\" after \"]\"", in)
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return Rule{}, fmt.Errorf("%q: %v", in, err)
			}
			port = p
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return Rule{}, fmt.Errorf("%q: %q is not an IPv6 address", in, host)
		}
		// A v4-mapped address is the IPv4 one (as the proxy compares).
		return Rule{Addr: a.Unmap(), Port: port}, nil
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			return Rule{}, fmt.Errorf("%q: an IPv6 address is written in brackets, [::1] or [::1]:8080", in)
		}
		p, err := parsePort(s[i+1:])
		if err != nil {
			return Rule{}, fmt.Errorf("%q: %v", in, err)
		}
		host, port = s[:i], p
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return Rule{}, fmt.Errorf("%q: %q is not an IPv4 address", in, host)
		}
		return Rule{Addr: a, Port: port}, nil
	}
	r := Rule{Port: port}
	if strings.HasPrefix(host, "*.") {
		r.Glob, host = true, host[2:]
	}
	name, err := CanonicalName(host)
	if err != nil {
		return Rule{}, fmt.Errorf("%q: %v", in, err)
	}
	if r.Glob && !strings.Contains(name, ".") {
		return Rule{}, fmt.Errorf("%q: a glob names a domain with at least two labels (\"*.example.com\"), not a top-level domain", in)
	}
	if looksNumeric(name) {
		return Rule{}, fmt.Errorf("%q: %q is neither a host name nor an IPv4 address", in, host)
	}
	r.Host = name
	return r, nil
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
		}
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d is out of range (1 to 65535)", n)
	}
	return n, nil
}

// CanonicalName lower-cases a DNS host name and drops one trailing dot; it
// refuses anything but letters, digits, '-' and '_' in labels of 1 to 63
// bytes, 253 bytes in all. A '*' anywhere is refused: the only glob is a
// leading "*.", which ParseRule takes off first.
func CanonicalName(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", fmt.Errorf("empty host name")
	}
	if len(h) > 253 {
		return "", fmt.Errorf("host name of %d bytes (at most 253)", len(h))
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return "", fmt.Errorf("%q has an empty label", h)
		}
		if len(label) > 63 {
			return "", fmt.Errorf("%q has a label over 63 bytes", h)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("%q has a label that starts or ends with '-'", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c == '*':
				return "", fmt.Errorf("%q: '*' is only allowed as a leading \"*.\" (\"*.example.com\")", h)
			case c >= utf8.RuneSelf:
				// Say the character, not its first byte read as Latin-1.
				r, _ := utf8.DecodeRuneInString(label[i:])
				return "", fmt.Errorf("%q has the character %q, not allowed in a host name (a name in another script is written in its xn-- form, as DNS knows it)", h, r)
			default:
				return "", fmt.Errorf("%q has the character %q, not allowed in a host name", h, rune(c))
			}
		}
	}
	return h, nil
}

// looksNumeric reports whether every label is digits: such a name would
// be read as an address by some resolvers ("127.1"), so it is refused.
func looksNumeric(h string) bool {
	for _, label := range strings.Split(h, ".") {
		for i := 0; i < len(label); i++ {
			if label[i] < '0' || label[i] > '9' {
				return false
			}
		}
	}
	return true
}

// Allowlist is a parsed allow_net.
type Allowlist struct {
	rules []Rule
}

// ParseAllowlist reads allow_net entries; the error names the entry.
func ParseAllowlist(entries []string) (*Allowlist, error) {
	a := &Allowlist{}
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, err
		}
		a.rules = append(a.rules, r)
	}
	return a, nil
}

// Rules returns the parsed rules.
func (a *Allowlist) Rules() []Rule { return append([]Rule(nil), a.rules...) }

func portMatches(rule, port int) bool {
	if rule == 0 {
		return port == 80 || port == 443
	}
	return rule == port
}

// AllowsName reports whether a rule allows the host name (already
// canonical: see CanonicalName) on port. Address rules never match a name.
func (a *Allowlist) AllowsName(name string, port int) bool {
	for _, r := range a.rules {
		if r.Addr.IsValid() || !portMatches(r.Port, port) {
			continue
		}
		if r.Glob {
			if strings.HasSuffix(name, "."+r.Host) {
				return true
			}
		} else if name == r.Host {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether an address rule lists addr on port.
func (a *Allowlist) AllowsAddr(addr netip.Addr, port int) bool {
	addr = addr.Unmap()
	for _, r := range a.rules {
		if r.Addr.IsValid() && r.Addr == addr && portMatches(r.Port, port) {
			return true
		}
	}
	return false
}

// Public reports whether addr is a globally routable unicast address, the
// only kind a listed name may lead to: see NotPublic.
func Public(addr netip.Addr) bool { return NotPublic(addr) == "" }

// NotPublic says why addr is not globally routable unicast, or "" when it
// is. IPv4: not unspecified, loopback, link-local, multicast, broadcast,
// private (RFC 1918), nor in special4 (IANA's special-purpose registry:
// shared, documentation, benchmarking, reserved, ...). IPv6: inside
// 2000::/3 (the only global unicast space) and not in special6, or the
// NAT64 prefix 64:ff9b::/96; an address that carries an IPv4 one a gateway
// would reach (NAT64, 6to4, v4-mapped) is judged by that one too. Everything
// else (ULA, link-local, site-local, multicast, v4-compatible, Teredo,
// ORCHID, discard, ...) is not public.
func NotPublic(addr netip.Addr) string {
	if !addr.IsValid() {
		return "not an address"
	}
	if addr.Zone() != "" {
		return "an address with a zone (link-scoped)"
	}
	if addr.Is4In6() {
		if why := NotPublic(addr.Unmap()); why != "" {
			return "an IPv4-mapped address of " + why
		}
		return ""
	}
	if addr.Is4() {
		switch {
		case addr.IsUnspecified():
			return "the unspecified address"
		case addr.IsLoopback():
			return "a loopback address"
		case addr.IsLinkLocalUnicast():
			return "a link-local address"
		case addr.IsMulticast():
			return "a multicast address"
		case addr.IsPrivate():
			return "a private address (RFC 1918)"
		}
		for _, r := range special4 {
			if r.p.Contains(addr) {
				return r.what + " (" + r.p.String() + ")"
			}
		}
		if !addr.IsGlobalUnicast() {
			return "not a global unicast address"
		}
		return ""
	}
	b := addr.As16()
	embedded := func(kind string, v4 [4]byte) string {
		if why := NotPublic(netip.AddrFrom4(v4)); why != "" {
			return kind + " carrying " + netip.AddrFrom4(v4).String() + ", " + why
		}
		return ""
	}
	if nat64.Contains(addr) {
		return embedded("a NAT64 address (64:ff9b::/96)", [4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case addr.IsUnspecified():
		return "the unspecified address"
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsLinkLocalUnicast():
		return "a link-local address"
	case addr.IsMulticast():
		return "a multicast address"
	case addr.IsPrivate():
		return "a unique local address (fc00::/7)"
	}
	if !global6.Contains(addr) {
		if v4compat.Contains(addr) {
			return "an IPv4-compatible address (::/96, deprecated) carrying " + netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}).String()
		}
		return "outside the IPv6 global unicast space (2000::/3)"
	}
	if sixToFour.Contains(addr) {
		return embedded("a 6to4 address (2002::/16)", [4]byte{b[2], b[3], b[4], b[5]})
	}
	if teredo.Contains(addr) {
		// Reached through a Teredo relay, whatever the server and client
		// it names (bits 32-63, and the last 32 inverted): never public.
		return fmt.Sprintf("a Teredo address (2001::/32, server %s, client %s)",
			netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	for _, r := range special6 {
		if r.p.Contains(addr) {
			return r.what + " (" + r.p.String() + ")"
		}
	}
	return ""
}

type special struct {
	p    netip.Prefix
	what string
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	v4compat  = netip.MustParsePrefix("::/96")
	global6   = netip.MustParsePrefix("2000::/3")
)

// special4: IANA's IPv4 special-purpose ranges that are not globally
// reachable (the rest of not-public is netip's: loopback, private, ...).
var special4 = []special{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "the deprecated 6to4 relay anycast"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
}

// special6: ranges inside 2000::/3 that are not globally reachable unicast.
var special6 = []special{
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (benchmarking, ORCHID, ...)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
}
