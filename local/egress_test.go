//go:build linux

package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// egressProcs lists the pids of the proxy processes of the session named
// name (their argv is "sbx-egress <name>").
func egressProcs(t *testing.T, name string) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if string(raw) == "sbx-egress\x00"+name+"\x00" {
			if st, err := procStartTime(pid); err == nil && st > 0 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// With allow_net the sandbox keeps its own network: the host's loopback is
// not reachable directly, the listed address is through the proxy, anything
// else is refused with the proxy's message, and every decision is audited.
func TestEgressAllowlist(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from the host") }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "must not be reached") }))
	defer other.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	oport := other.Listener.Addr().(*net.TCPAddr).Port
	name := "egress-" + strconv.Itoa(os.Getpid())
	state := shortTempDir(t)
	work := filepath.Join(state, "work")
	os.MkdirAll(work, 0o755)
	p := &Provider{Version: "test", Egress: &Egress{Allow: []string{"127.0.0.1:" + strconv.Itoa(port), "localhost:" + strconv.Itoa(oport)}}}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: name, StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	released := false
	defer func() {
		if !released {
			sb.Release(context.Background())
		}
	}()
	out, _ := run(t, sb, "echo $HTTPS_PROXY $http_proxy")
	if strings.TrimSpace(out) != "http://127.0.0.1:3128 http://127.0.0.1:3128" {
		t.Fatalf("proxy variables: %q", out)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	out, res := run(t, sb, "curl -sS --noproxy '' "+url)
	if res.ExitCode != 0 || out != "hello from the host" {
		t.Fatalf("listed address through the proxy: exit %d %q", res.ExitCode, out)
	}
	// Directly: the sandbox's loopback is its own.
	out, res = run(t, sb, "curl -sS --max-time 5 --noproxy '*' "+url)
	if res.ExitCode == 0 || strings.Contains(out, "hello") {
		t.Fatalf("the host's loopback reached directly: exit %d %q", res.ExitCode, out)
	}
	// Another port of the same address, and a listed name that is loopback.
	for _, target := range []string{"http://127.0.0.1:" + strconv.Itoa(oport) + "/", "http://localhost:" + strconv.Itoa(oport) + "/"} {
		out, _ = run(t, sb, "curl -sS -w ' %{http_code}' --noproxy '' "+target)
		if strings.Contains(out, "must not be reached") || !strings.Contains(out, "sbx egress proxy: refused") || !strings.Contains(out, " 403") || !strings.Contains(out, "allow_net") {
			t.Fatalf("%s: %q, want the proxy's 403", target, out)
		}
	}
	out, _ = run(t, sb, "curl -sS -w ' %{http_code}' --noproxy '' -p http://127.0.0.1:22/")
	if !strings.Contains(out, "403") {
		t.Fatalf("CONNECT to the host's port 22: %q", out)
	}
	raw, _ := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	audit := string(raw)
	if strings.Count(audit, `"where":"egress"`) < 4 || !strings.Contains(audit, `"allowed":true`) || !strings.Contains(audit, `"host":"localhost"`) {
		t.Fatalf("audit log:\n%s", audit)
	}
	if len(egressProcs(t, name)) != 1 {
		t.Fatalf("want one proxy process, have %v", egressProcs(t, name))
	}
	sb.Release(context.Background())
	released = true
	deadline := time.Now().Add(10 * time.Second)
	for len(egressProcs(t, name)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy process outlived the sandbox: %v", egressProcs(t, name))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A listed name that does not resolve fails the claim, naming the key.
func TestEgressUnresolvableHost(t *testing.T) {
	state := shortTempDir(t)
	p := &Provider{Version: "test", Egress: &Egress{Allow: []string{"no-such-host.invalid"}}}
	_, err := p.Claim(context.Background(), sandbox.Spec{Name: "t", StateDir: state})
	if err == nil || !strings.Contains(err.Error(), "allow_net: no-such-host.invalid does not resolve") {
		t.Fatalf("got %v", err)
	}
}

// A sandbox that opens connection after connection to the proxy holds at
// most MaxEgressConns of them on the host; the next is closed at once, and
// once it lets go the proxy serves again.
func TestEgressConnectionBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	state := shortTempDir(t)
	work := filepath.Join(state, "work")
	os.MkdirAll(work, 0o755)
	p := &Provider{Version: "test", Egress: &Egress{Allow: []string{"127.0.0.1:" + strconv.Itoa(port)}}}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "bound", StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Release(context.Background())
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	script := "for i in $(seq " + strconv.Itoa(MaxEgressConns) + "); do exec {fd}<>/dev/tcp/127.0.0.1/3128 || exit 9; done; " +
		"curl -sS --max-time 10 --noproxy '' " + url + "; echo \" rc=$?\""
	out, res := run(t, sb, "ulimit -n 4096; bash -c '"+strings.ReplaceAll(script, "'", `'\''`)+"'")
	if res.ExitCode != 0 || strings.Contains(out, "ok rc=0") || !strings.Contains(out, "rc=52") && !strings.Contains(out, "rc=56") {
		t.Fatalf("past the bound: exit %d %q", res.ExitCode, out)
	}
	// The held connections went with that command: the proxy serves again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ = run(t, sb, "curl -sS --max-time 5 --noproxy '' "+url)
		if out == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the held connections closed: %q", out)
		}
	}
}

// A sandbox that sends refused request after refused request cannot fill the
// host's disk through the audit log: the proxy stops logging its decisions
// once audit.jsonl is over the bound, says so there once, and counts the
// rest.
func TestEgressAuditBound(t *testing.T) {
	state := shortTempDir(t)
	work := filepath.Join(state, "work")
	os.MkdirAll(work, 0o755)
	const bound = 64 << 10
	p := &Provider{Version: "test", Egress: &Egress{Allow: []string{"127.0.0.1:1"}, AuditMax: bound}}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "auditbound", StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Release(context.Background())
	// 3000 refused requests pipelined on one connection (~1 MB of audit
	// lines unbounded), the last one closing it: when grep ends, the proxy
	// has answered, and so audited, every one.
	script := `exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9
{ for i in $(seq 3000); do printf 'GET http://refused.example/%d HTTP/1.1\r\nHost: refused.example\r\n\r\n' $i; done
  printf 'GET http://refused.example/last HTTP/1.1\r\nHost: refused.example\r\nConnection: close\r\n\r\n'; } >&3 &
grep -c '^HTTP/1.1 403' <&3`
	out, res := run(t, sb, "bash -c '"+strings.ReplaceAll(script, "'", `'\''`)+"'")
	if strings.TrimSpace(out) != "3001" {
		t.Fatalf("refused requests answered: exit %d %q, want 3001", res.ExitCode, out)
	}
	fi, err := os.Stat(filepath.Join(state, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if fi.Size() > bound+4<<10 || !strings.Contains(string(raw), "not logged") {
		t.Fatalf("audit.jsonl is %d bytes after 3001 refusals (bound %d), marker present: %v", fi.Size(), bound, strings.Contains(string(raw), "not logged"))
	}
}

// TestEgressAuditCannotBeForged: every name the sandbox sends the proxy
// goes into the session's audit.jsonl. Targets with quotes, backslashes,
// braces, a %-escaped newline, U+2028 and bytes that are not UTF-8, sent
// raw by a command, each stay inside their own line's JSON string: every
// line parses, none says a refused name was allowed, and no line has a
// "where" or "allowed" the sandbox wrote.
func TestEgressAuditCannotBeForged(t *testing.T) {
	name := "egressforge-" + strconv.Itoa(os.Getpid())
	state := shortTempDir(t)
	work := filepath.Join(state, "work")
	os.MkdirAll(work, 0o755)
	p := &Provider{Version: "test", Egress: &Egress{Allow: []string{"192.0.2.1"}}}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: name, StateDir: state, Mounts: []sandbox.Mount{{Source: work, Target: "/srv/code"}}})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer sb.Release(context.Background())
	forged := `{"where":"forged","egress":{"allowed":true}}`
	targets := []string{
		`a"},"where":"forged","egress":{"allowed":true,"host":"x.example:443`,
		`a\\"b.example:443`,
		`evil.example%0A` + forged + `:443`,
		"evil.example\xe2\x80\xa8" + forged + ":443",
		"evil.example\x0b" + forged + ":443",
	}
	// These pass net/http's parser as an absolute-form URL's host (the
	// ones above, and every CONNECT of these, it refuses with a 400 before
	// the proxy judges them): each must be one line of its own.
	reach := []string{
		"evil\xff\xfe.example:443",
		"evil\xe2\x80\xa8x.example:443", // U+2028, a line separator to JavaScript
		"evil\xc2\x85x.example:443",     // U+0085, NEL
	}
	targets = append(targets, reach...)
	var script strings.Builder
	for _, tg := range targets {
		// One connection per request; printf %s keeps the bytes as they are.
		// A proxy that refuses the request's framing closes early: a
		// write into it may fail (SIGPIPE), which is no failure here.
		fmt.Fprintf(&script, "(exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT %%s HTTP/1.1\\r\\nHost: %%s\\r\\n\\r\\n' %s %s >&3 && timeout 5 head -c 200 <&3 >/dev/null) 2>/dev/null || true\n", shQuote(tg), shQuote(tg))
		fmt.Fprintf(&script, "(exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://%%s/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' %s >&3 && timeout 5 head -c 200 <&3 >/dev/null) 2>/dev/null || true\n", shQuote(tg))
	}
	if out, res := run(t, sb, "bash -c "+shQuote(script.String())); res.ExitCode != 0 {
		t.Fatalf("the requests: exit %d\n%s", res.ExitCode, out)
	}
	raw, _ := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) != len(reach) {
		t.Fatalf("%d audit lines, want one for each of the %d requests that reach the proxy's judgement:\n%s", len(lines), len(reach), raw)
	}
	for _, l := range lines {
		var d struct {
			Where  string `json:"where"`
			Egress struct {
				Allowed bool   `json:"allowed"`
				Host    string `json:"host"`
			} `json:"egress"`
		}
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("an audit line is not one JSON object (%v): %q", err, l)
		}
		if d.Where != "egress" || d.Egress.Allowed {
			t.Fatalf("a forged or allowed decision: %q", l)
		}
	}
}

// shQuote quotes s for sh, single quotes inside closed and escaped.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
