package egress

import (
	"bufio"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "example.com", want: "example.com"},
		{in: "Example.COM.", want: "example.com"},
		{in: "*.example.com", want: "*.example.com"},
		{in: "example.com:8080", want: "example.com:8080"},
		{in: "10.0.0.5", want: "10.0.0.5"},
		{in: "127.0.0.1:5000", want: "127.0.0.1:5000"},
		{in: "[::1]:443", want: "[::1]:443"},
		{in: "[fd00::1]", want: "[fd00::1]"},
		{in: "[::ffff:10.0.0.5]:8080", want: "10.0.0.5:8080"}, // v4-mapped: the IPv4 address it is (it matched nothing)
		{in: "", err: "empty entry"},
		{in: "example.com:0", err: "out of range"},
		{in: "example.com:65536", err: "out of range"},
		{in: "example.com:http", err: "not a number"},
		{in: "example.com:", err: "not a number"},
		{in: "*example.com", err: "'*' is only allowed"},
		{in: "a.*.example.com", err: "'*' is only allowed"},
		{in: "*.*.example.com", err: "'*' is only allowed"},
		{in: "*.com", err: "top-level domain"},
		{in: "*", err: "'*' is only allowed"},
		{in: "exa mple.com", err: "not allowed in a host name"},
		{in: "bücher.example", err: "the character 'ü', not allowed in a host name (a name in another script is written in its xn-- form"},
		{in: "a..b", err: "empty label"},
		{in: "-a.com", err: "starts or ends"},
		{in: "::1", err: "brackets"},
		{in: "[::1", err: "unclosed"},
		{in: "[10.0.0.1]", err: "not an IPv6 address"},
		{in: "[fe80::1%eth0]", err: "not an IPv6 address"},
		{in: "127.1", err: "neither a host name"},
		{in: strings.Repeat("a", 64) + ".com", err: "over 63"},
	} {
		r, err := ParseRule(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.String() != tc.want {
			t.Errorf("%q: %v %v, want %s", tc.in, r, err, tc.want)
		}
	}
}

func TestAllows(t *testing.T) {
	a := mustAllow(t, "proxy.example", "*.sum.example", "registry.example:8443", "10.1.2.3:9000")
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"proxy.example", 443, true},
		{"proxy.example", 80, true},
		{"proxy.example", 22, false},
		{"a.proxy.example", 443, false},
		{"sum.example", 443, false},
		{"x.sum.example", 443, true},
		{"x.y.sum.example", 443, true},
		{"xsum.example", 443, false},
		{"registry.example", 8443, true},
		{"registry.example", 443, false},
	} {
		if got := a.AllowsName(tc.host, tc.port); got != tc.want {
			t.Errorf("%s:%d = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	if !a.AllowsAddr(netip.MustParseAddr("10.1.2.3"), 9000) || a.AllowsAddr(netip.MustParseAddr("10.1.2.3"), 443) || a.AllowsName("10.1.2.3", 9000) {
		t.Error("address rules")
	}
	if !a.AllowsAddr(netip.MustParseAddr("::ffff:10.1.2.3"), 9000) {
		t.Error("a v4-mapped address is the v4 one")
	}
}

func TestPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1::1": true,
		"127.0.0.1": false, "10.0.0.1": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "::1": false, "fe80::1": false, "fd00::1": false, "::": false,
		"::ffff:127.0.0.1": false, "64:ff9b::a00:1": false, "64:ff9b::5db8:d822": true, "2002:a00:1::": false,
		"224.0.0.1": false, "255.255.255.255": false,
	} {
		if got := Public(netip.MustParseAddr(s)); got != want {
			t.Errorf("Public(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestPublicSpecialRanges: every range that is not globally routable is
// refused as a name's address, each named by the reason.
func TestPublicSpecialRanges(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		public     bool
		why        string
	}{
		{"TEST-NET-1", "192.0.2.10", false, "documentation"},
		{"TEST-NET-2", "198.51.100.10", false, "documentation"},
		{"TEST-NET-3", "203.0.113.10", false, "documentation"},
		{"CGNAT", "100.64.1.1", false, "shared"},
		{"CGNAT top", "100.127.255.254", false, "shared"},
		{"after CGNAT", "100.128.0.1", true, ""},
		{"this network", "0.1.2.3", false, "this network"},
		{"reserved", "240.1.2.3", false, "reserved"},
		{"broadcast", "255.255.255.255", false, "reserved"},
		{"multicast v4", "239.1.2.3", false, "multicast"},
		{"benchmarking", "198.19.1.1", false, "benchmarking"},
		{"after benchmarking", "198.20.0.1", true, ""},
		{"6to4 relay anycast", "192.88.99.1", false, "6to4"},
		{"IETF protocol assignments v4", "192.0.0.170", false, "IETF"},
		{"Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", false, "Teredo"},
		{"Teredo carrying loopback", "2001:0:7f00:1::80ff:fffe", false, "Teredo"},
		{"IETF protocol assignments v6", "2001:2::1", false, "IETF"},
		{"documentation v6", "2001:db8::1", false, "documentation"},
		{"documentation v6 3fff", "3fff:abc::1", false, "documentation"},
		{"6to4 of private", "2002:c0a8:0101::1", false, "192.168.1.1"},
		{"6to4 of documentation", "2002:c000:0201::1", false, "192.0.2.1"},
		{"6to4 of public", "2002:5db8:d822::1", true, ""},
		{"NAT64 of private", "64:ff9b::10.0.0.1", false, "10.0.0.1"},
		{"NAT64 of CGNAT", "64:ff9b::100.64.0.1", false, "100.64.0.1"},
		{"NAT64 of public", "64:ff9b::93.184.216.34", true, ""},
		{"local-use NAT64", "64:ff9b:1::93.184.216.34", false, "2000::/3"},
		{"v4-mapped private", "::ffff:10.0.0.1", false, "private"},
		{"v4-compatible private", "::10.0.0.1", false, "IPv4-compatible"},
		{"v4-compatible public", "::93.184.216.34", false, "IPv4-compatible"},
		{"multicast v6", "ff0e::1", false, "multicast"},
		{"ULA", "fd00::1", false, "unique local"},
		{"site-local", "fec0::1", false, "2000::/3"},
		{"discard", "100::1", false, "2000::/3"},
		{"SRv6 SIDs", "5f00::1", false, "2000::/3"},
		{"outside 2000::/3", "4000::1", false, "2000::/3"},
		{"global v6", "2606:2800:220:1::1", true, ""},
		{"global v4", "8.8.8.8", true, ""},
	} {
		a := netip.MustParseAddr(tc.addr)
		why := NotPublic(a)
		if (why == "") != tc.public || !strings.Contains(why, tc.why) {
			t.Errorf("%s: NotPublic(%s) = %q, want public=%v with %q", tc.name, tc.addr, why, tc.public, tc.why)
		}
		if got := oraclePublic(a.AsSlice()); got != tc.public {
			t.Errorf("%s: the fuzz oracle says public=%v for %s", tc.name, got, tc.addr)
		}
	}
}

// The oracle: the grammar of an entry written as one regular expression, and
// matching by comparing label lists, independent of ParseRule's hand-written
// scanner and AllowsName's suffix test.
var (
	oracleLabel = `[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?`
	oracleName  = regexp.MustCompile(`^(\*\.)?(` + oracleLabel + `(\.` + oracleLabel + `)*)\.?(:([0-9]{1,5}))?$`)
)

type oracleRule struct {
	glob   bool
	labels []string
	port   int
}

func oracleParse(entry string) (oracleRule, bool) {
	s := strings.ToLower(strings.TrimSpace(entry))
	m := oracleName.FindStringSubmatch(s)
	if m == nil {
		return oracleRule{}, false
	}
	name := m[2]
	if len(name) > 253 {
		return oracleRule{}, false
	}
	labels := strings.Split(name, ".")
	allDigits := true
	for _, l := range labels {
		if strings.Trim(l, "0123456789") != "" {
			allDigits = false
		}
	}
	if allDigits {
		return oracleRule{}, false
	}
	r := oracleRule{glob: m[1] != "", labels: labels}
	if r.glob && len(labels) < 2 {
		return oracleRule{}, false
	}
	if m[7] != "" {
		p, _ := strconv.Atoi(m[7])
		if p < 1 || p > 65535 {
			return oracleRule{}, false
		}
		r.port = p
	}
	return r, true
}

func (r oracleRule) allows(host string, port int) bool {
	if r.port == 0 && port != 80 && port != 443 || r.port != 0 && r.port != port {
		return false
	}
	hl := strings.Split(host, ".")
	if r.glob {
		if len(hl) <= len(r.labels) {
			return false
		}
		hl = hl[len(hl)-len(r.labels):]
	}
	if len(hl) != len(r.labels) {
		return false
	}
	for i := range hl {
		if hl[i] != r.labels[i] {
			return false
		}
	}
	return true
}

func FuzzRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com", "a.b:8080", "*.com", "10.0.0.1:80", "[::1]:443", "ex*ample.com", "A.B.", "x_y.z:65535", "1.2.3", "a:0"} {
		f.Add(s, "x.example.com", 443)
	}
	f.Fuzz(func(t *testing.T, entry, host string, port int) {
		r, err := ParseRule(entry)
		o, ok := oracleParse(entry)
		isAddr := err == nil && r.Addr.IsValid()
		if isAddr {
			return // address literals: netip's grammar, not the oracle's
		}
		if (err == nil) != ok {
			t.Fatalf("ParseRule(%q) = %v, %v; the oracle says valid=%v", entry, r, err, ok)
		}
		if err != nil {
			return
		}
		a := &Allowlist{rules: []Rule{r}}
		name, nerr := CanonicalName(host)
		if nerr != nil {
			return
		}
		if got, want := a.AllowsName(name, port), o.allows(name, port); got != want {
			t.Fatalf("rule %q, host %q:%d: AllowsName %v, oracle %v", entry, name, port, got, want)
		}
		// The canonical form parses back to the same rule.
		r2, err := ParseRule(r.String())
		if err != nil || r2 != r {
			t.Fatalf("%q -> %q -> %v %v", entry, r.String(), r2, err)
		}
	})
}
