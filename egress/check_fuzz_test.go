package egress

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// FuzzCheck: the target of a CONNECT or an http:// request is the
// sandbox's choice, and so (through the DNS of a name it controls) is the
// address a listed glob resolves to. The oracle decides independently: a
// target is allowed only if it is an address literal listed with its port,
// or a name that the oracle's label comparison matches and whose every
// (stub-resolved) address is listed, or globally routable by
// oraclePublic and not one of this host's own; and what Check returns is
// then one of those addresses, on the asked port.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"proxy.example", "x.sum.example", "10.1.2.3", "[::1]", "127.0.0.1", "PROXY.example.", "evil.example", "a..b", "[fe80::1%eth0]", "::ffff:10.1.2.3", "priv.sum.example", "0x7f.0.0.1", "127.1"} {
		for _, a := range publicSeeds {
			f.Add(s, 443, netip.MustParseAddr(a).AsSlice())
		}
		f.Add(s, 9000, []byte{10, 1, 2, 3})
		f.Add(s, 443, []byte(nil))
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
	own := map[netip.Addr]bool{}
	ifs, _ := net.InterfaceAddrs()
	for _, ia := range ifs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				own[a.Unmap()] = true
			}
		}
	}
	// isOwn: one of the host's addresses, or (bytes 12-15 of a NAT64
	// address, 2-5 of a 6to4 one) carrying one of its IPv4 addresses.
	isOwn := func(b []byte) bool {
		a, _ := netip.AddrFromSlice(b)
		if own[a.Unmap()] {
			return true
		}
		if len(b) == 16 && b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && string(b[4:12]) == "\x00\x00\x00\x00\x00\x00\x00\x00" {
			return own[netip.AddrFrom4([4]byte(b[12:16]))]
		}
		if len(b) == 16 && b[0] == 0x20 && b[1] == 0x02 {
			return own[netip.AddrFrom4([4]byte(b[2:6]))]
		}
		return false
	}
	listed := func(a netip.Addr, port int) bool {
		a = a.Unmap()
		return a == netip.AddrFrom4([4]byte{10, 1, 2, 3}) && port == 9000 || a == netip.IPv6Loopback() && port == 443
	}
	f.Fuzz(func(t *testing.T, host string, port int, resolved []byte) {
		stub := func(_ context.Context, host string) ([]netip.Addr, error) {
			out := []netip.Addr{netip.AddrFrom4([4]byte{93, 184, 216, 34})}
			if strings.HasPrefix(host, "priv.") {
				out = append(out, netip.AddrFrom4([4]byte{10, 1, 2, 3}))
			}
			if a, ok := netip.AddrFromSlice(resolved); ok {
				out = append(out, a)
			}
			return out, nil
		}
		p := &Proxy{Allow: allow, Resolve: stub}
		ap, err := p.Check(context.Background(), host, port)
		want := false
		var wantAddrs []netip.Addr
		lit := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if a, perr := netip.ParseAddr(lit); perr == nil {
			want = a.Zone() == "" && listed(a, port)
			wantAddrs = []netip.Addr{a.Unmap()}
		} else if name, nerr := CanonicalName(host); nerr == nil && !looksNumeric(name) {
			for _, r := range rules {
				if r.allows(name, port) {
					want = true
				}
			}
			addrs, _ := stub(context.Background(), name)
			for _, a := range addrs {
				if !listed(a, port) && (!oraclePublic(a.AsSlice()) || isOwn(a.AsSlice())) {
					want = false
				}
				wantAddrs = append(wantAddrs, a.Unmap())
			}
		}
		if (err == nil) != want {
			t.Fatalf("Check(%q, %d) resolving to %v = %v, %v; oracle allowed=%v", host, port, resolved, ap, err, want)
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

// publicSeeds are one address in and around each special range.
var publicSeeds = []string{
	"93.184.216.34", "2606:2800:220:1::1", "8.8.8.8", "1.1.1.1",
	"192.0.2.1", "198.51.100.7", "203.0.113.9", "100.64.0.1", "100.127.255.255", "100.128.0.0", "0.1.2.3",
	"240.0.0.1", "255.255.255.255", "224.0.0.1", "239.255.255.250", "198.18.0.1", "198.19.255.255", "198.20.0.0",
	"192.0.0.8", "192.88.99.1", "192.168.0.1", "172.31.255.255", "172.32.0.0", "169.254.169.254", "127.0.0.1", "10.0.0.1",
	"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:1ff::1", "2001:200::1", "2001:db8::1", "2001:db9::1",
	"2002:a00:1::", "2002:c000:0201::", "2002:5db8:d822::1", "64:ff9b::a00:1", "64:ff9b::5db8:d822", "64:ff9b:1::5db8:d822",
	"::ffff:127.0.0.1", "::ffff:93.184.216.34", "::10.0.0.1", "::93.184.216.34", "::", "::1", "fe80::1", "fc00::1", "fd12::1",
	"fec0::1", "ff02::1", "ff0e::1", "3fff::1", "3fff:1000::1", "4000::1", "100::1", "5f00::1", "2620:4f:8000::1",
}

// oraclePublic decides from the raw bytes (4 or 16), independently of
// netip's predicates and of NotPublic's tables: IPv4 ranges of IANA's
// special-purpose registry written as first/last 32-bit numbers; IPv6
// admitted only inside 2000::/3 by its first bits, the embedded IPv4 of
// v4-mapped, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) judged as IPv4.
func oraclePublic(b []byte) bool {
	switch len(b) {
	case 4:
		v := binary.BigEndian.Uint32(b)
		for _, r := range [][2]uint32{
			{0x00000000, 0x00ffffff}, // 0.0.0.0/8
			{0x0a000000, 0x0affffff}, // 10/8
			{0x64400000, 0x647fffff}, // 100.64/10
			{0x7f000000, 0x7fffffff}, // 127/8
			{0xa9fe0000, 0xa9feffff}, // 169.254/16
			{0xac100000, 0xac1fffff}, // 172.16/12
			{0xc0000000, 0xc00000ff}, // 192.0.0/24
			{0xc0000200, 0xc00002ff}, // 192.0.2/24
			{0xc0586300, 0xc05863ff}, // 192.88.99/24
			{0xc0a80000, 0xc0a8ffff}, // 192.168/16
			{0xc6120000, 0xc613ffff}, // 198.18/15
			{0xc6336400, 0xc63364ff}, // 198.51.100/24
			{0xcb007100, 0xcb0071ff}, // 203.0.113/24
			{0xe0000000, 0xffffffff}, // 224/4 multicast, 240/4 reserved
		} {
			if v >= r[0] && v <= r[1] {
				return false
			}
		}
		return true
	case 16:
		zero := func(p []byte) bool {
			for _, c := range p {
				if c != 0 {
					return false
				}
			}
			return true
		}
		if zero(b[:10]) && b[10] == 0xff && b[11] == 0xff {
			return oraclePublic(b[12:])
		}
		if b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && zero(b[4:12]) {
			return oraclePublic(b[12:])
		}
		if b[0]>>5 != 1 { // not 2000::/3
			return false
		}
		w0, w1 := binary.BigEndian.Uint16(b[0:]), binary.BigEndian.Uint16(b[2:])
		switch {
		case w0 == 0x2001 && w1 <= 0x01ff: // 2001::/23, Teredo among them
			return false
		case w0 == 0x2001 && w1 == 0x0db8: // documentation
			return false
		case w0 == 0x3fff && w1 <= 0x0fff: // documentation 3fff::/20
			return false
		case w0 == 0x2002:
			return oraclePublic(b[2:6])
		}
		return true
	}
	return false
}

// FuzzPublic: NotPublic against oraclePublic for any 4 or 16 bytes.
func FuzzPublic(f *testing.F) {
	for _, s := range publicSeeds {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		if got, want := Public(a), oraclePublic(b); got != want {
			t.Fatalf("Public(%s) = %v (%q); the oracle says %v", a, got, NotPublic(a), want)
		}
	})
}
