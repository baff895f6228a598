package main

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/egress"
)

// hostGoEnv reads the host's go env at test time: registries' hosts are
// never written into the tests.
func hostGoEnv(t *testing.T, names ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v (the test needs the go command on the host)", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// registryHosts are the hosts of GOPROXY's URLs and of GOSUMDB, each with
// its port when the URL names one; a GOSUMDB host that does not resolve
// here is left out (go reaches the checksum database through the proxy
// then), and said.
func registryHosts(t *testing.T, goproxy, gosumdb string) []string {
	var hosts []string
	for _, p := range strings.FieldsFunc(goproxy, func(r rune) bool { return r == ',' || r == '|' }) {
		if p == "direct" || p == "off" {
			continue
		}
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			t.Fatalf("GOPROXY entry %q is not a URL", p)
		}
		hosts = append(hosts, u.Host)
	}
	if len(hosts) == 0 {
		t.Fatalf("GOPROXY=%q names no proxy: the test needs one reachable from this host", goproxy)
	}
	if f := strings.Fields(gosumdb); len(f) > 0 && f[0] != "off" {
		name := strings.SplitN(f[0], "+", 2)[0]
		if len(f) > 1 {
			if u, err := url.Parse(f[1]); err == nil && u.Host != "" {
				name = u.Host
			}
		}
		if _, err := net.LookupHost(strings.Split(name, ":")[0]); err == nil {
			hosts = append(hosts, name)
		} else {
			t.Logf("GOSUMDB's host does not resolve here (%v): left out of allow_net; go asks the proxy for the checksum database", err)
		}
	}
	return withLocalAddrs(t, hosts)
}

// withLocalAddrs is allow_net entries hosts and, for each name that
// resolves here to an address that is not globally routable (a lab or
// corporate network may put its registry or mirror at one), that address
// too: the proxy refuses such a name unless the address is listed, and a
// user on that network lists it so.
func withLocalAddrs(t *testing.T, hosts []string) []string {
	for _, h := range hosts {
		name, port, err := net.SplitHostPort(h)
		if err != nil {
			name, port = h, ""
		}
		addrs, _ := net.DefaultResolver.LookupNetIP(context.Background(), "ip", name)
		for _, a := range addrs {
			if why := egress.NotPublic(a.Unmap()); why != "" {
				entry := a.Unmap().String()
				if a.Unmap().Is6() {
					entry = "[" + entry + "]"
				}
				if port != "" {
					entry += ":" + port
				}
				t.Logf("%s resolves to %s here, %s: listed as an address too", name, a, why)
				hosts = append(hosts, entry)
			}
		}
	}
	return hosts
}

// A real module with a dependency fetches it in the sandbox through
// allow_net naming the hosts of the host's GOPROXY and GOSUMDB; without
// them in the list the proxy refuses it (403, audited); a host not listed
// is refused with the proxy's message while the listed ones work; and a
// later session finds the module in the shared cache with the network off.
func TestGoModuleThroughAllowNet(t *testing.T) {
	w := newWorld(t)
	cacheHome := tempDir(t)
	goenv := hostGoEnv(t, "GOPROXY", "GOSUMDB")
	hosts := registryHosts(t, goenv[0], goenv[1])
	os.WriteFile(filepath.Join(w.code, "go.mod"), []byte("module example.com/cmpuser\n\ngo 1.21\n\nrequire github.com/google/go-cmp v0.6.0\n"), 0o644)
	os.WriteFile(filepath.Join(w.code, "m_test.go"), []byte(`package cmpuser

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	if d := cmp.Diff([]int{1, 2}, []int{1, 2}); d != "" {
		t.Fatal(d)
	}
	if cmp.Diff("a", "b") == "" {
		t.Fatal("no diff")
	}
}
`), 0o644)
	env := []string{"XDG_CACHE_HOME=" + cacheHome, "GOPROXY=" + goenv[0], "GOSUMDB=" + goenv[1], "GOTOOLCHAIN=local",
		"SBX_FORWARD_ENV=GOPROXY,GOSUMDB,GOTOOLCHAIN"}
	sbxAs := ordinaryUser(t, w, cacheHome)

	// Not listed: an address allowed, the registry refused by the proxy.
	r := sbxAs(t, w.code, env, "exec", "--session", "nolist", "--allow-net", "127.0.0.1:1", "--", "go mod tidy")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "Forbidden") {
		t.Fatalf("go mod tidy without the registry in allow_net: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Listed: the module comes, the test passes, go.sum comes back.
	args := []string{"exec", "--session", "list", "--keep"}
	for _, h := range hosts {
		args = append(args, "--allow-net", h)
	}
	r = sbxAs(t, w.code, env, append(args, "--", "go mod tidy && go test ./...")...)
	if r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Fatalf("go test through allow_net %v: exit %d\n%s%s", hosts, r.code, r.stdout, r.stderr)
	}
	sum, _ := os.ReadFile(filepath.Join(w.code, "go.sum"))
	if !strings.Contains(string(sum), "github.com/google/go-cmp v0.6.0") {
		t.Fatalf("go.sum on the host: %q", sum)
	}
	// In the same sandbox, a host not listed (npm's registry, as npm says)
	// is refused with the proxy's message.
	if npmReg, err := exec.Command("npm", "config", "get", "registry").Output(); err == nil {
		u, _ := url.Parse(strings.TrimSpace(string(npmReg)))
		r = sbxAs(t, w.code, env, "exec", "--session", "list", "--keep", "--", "curl -sS http://"+u.Hostname()+"/")
		if !strings.Contains(r.stdout, "sbx egress proxy: refused") || !strings.Contains(r.stdout, "--allow-net "+u.Hostname()) {
			t.Fatalf("a host not listed: %q %q", r.stdout, r.stderr)
		}
	} else {
		t.Fatalf("npm config get registry: %v (the test needs npm on the host)", err)
	}
	// The session's audit log holds the proxy's decisions, both kinds.
	audit := auditLogs(t, w)
	if !strings.Contains(audit, `"where":"egress"`) || !strings.Contains(audit, `"allowed":false`) || !strings.Contains(audit, `"allowed":true`) {
		t.Fatalf("audit logs:\n%s", audit)
	}
	sbxAs(t, w.code, nil, "release", "--session", "list")
	// A new session, no network at all: the shared module cache has it.
	r = sbxAs(t, w.code, append(env, "GOPROXY=off", "GOFLAGS=-mod=mod", "SBX_FORWARD_ENV=GOPROXY,GOFLAGS,GOTOOLCHAIN"), "exec", "--", "go test -count=1 ./...")
	if r.code != 0 {
		t.Fatalf("second session with GOPROXY=off: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// auditLogs is every session's audit log in the world's state dir.
func auditLogs(t *testing.T, w *world) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(w.state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Name() == "audit.jsonl" {
			raw, _ := os.ReadFile(p)
			b.Write(raw)
		}
		return nil
	})
	return b.String()
}
