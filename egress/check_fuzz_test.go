package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// FuzzCheck: the target of a CONNECT or an http:// request is the
// sandbox's choice. The oracle decides independently: a target is allowed
// only if it is an address literal listed with its port, or a name that
// the oracle's label comparison matches and whose every (stub-resolved)
// address is public or listed; and what Check returns is then one of those
// addresses, on the asked port.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"proxy.example", "x.sum.example", "10.1.2.3", "[::1]", "127.0.0.1", "PROXY.example.", "evil.example", "a..b", "[fe80::1%eth0]", "::ffff:10.1.2.3", "priv.sum.example", "0x7f.0.0.1", "127.1"} {
		f.Add(s, 443)
		f.Add(s, 9000)
	}
	entries := []string{"proxy.example", "*.sum.example", "10.1.2.3:9000", "[::1]:443"}
	allow, err := ParseAllowlist(entries)
	if err != nil {
		f.Fatal(err)
	}
	var rules []oracleRule
	for _, e := range entries[:2] {
		r, _ := oracleParse(e)
		rules = append(rules, r)
	}
	stub := func(_ context.Context, host string) ([]netip.Addr, error) {
		if strings.HasPrefix(host, "priv.") {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	p := &Proxy{Allow: allow, Resolve: stub}
	f.Fuzz(func(t *testing.T, host string, port int) {
		ap, err := p.Check(context.Background(), host, port)
		want := false
		var wantAddrs []netip.Addr
		lit := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if a, perr := netip.ParseAddr(lit); perr == nil {
			a = a.Unmap()
			want = a.Zone() == "" && (a == netip.MustParseAddr("10.1.2.3") && port == 9000 || a == netip.MustParseAddr("::1") && port == 443)
			wantAddrs = []netip.Addr{a}
		} else if name, nerr := CanonicalName(host); nerr == nil && !looksNumeric(name) {
			for _, r := range rules {
				if r.allows(name, port) {
					want = true
				}
			}
			addrs, _ := stub(context.Background(), name)
			for _, a := range addrs {
				if !Public(a) && !(a == netip.MustParseAddr("10.1.2.3") && port == 9000) {
					want = false
				}
			}
			wantAddrs = addrs
		}
		if (err == nil) != want {
			t.Fatalf("Check(%q, %d) = %v, %v; oracle allowed=%v", host, port, ap, err, want)
		}
		if err != nil {
			return
		}
		if int(ap.Port()) != port {
			t.Fatalf("Check(%q, %d) dials port %d", host, port, ap.Port())
		}
		found := false
		for _, a := range wantAddrs {
			if a == ap.Addr() {
				found = true
			}
		}
		if !found {
			t.Fatalf("Check(%q, %d) dials %s, not one of %v", host, port, ap, wantAddrs)
		}
	})
}
