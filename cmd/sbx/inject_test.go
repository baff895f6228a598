package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sbx-sh/sbx/egress"
)

// npm installs a real package through allow_net naming the host of npm's
// registry (npm config get registry, read now), and is refused by the proxy
// without it.
func TestNpmThroughAllowNet(t *testing.T) {
	w := newWorld(t)
	out, err := exec.Command("npm", "config", "get", "registry").Output()
	if err != nil {
		t.Fatalf("npm config get registry: %v (the test needs npm on the host)", err)
	}
	reg, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil || reg.Host == "" {
		t.Fatalf("npm's registry %q is not a URL", out)
	}
	env := []string{"XDG_CACHE_HOME=" + tempDir(t)}
	os.WriteFile(filepath.Join(w.code, "package.json"), []byte(`{"name":"t","version":"1.0.0","private":true}`), 0o644)
	install := "npm install --no-audit --no-fund --registry " + reg.String() + " is-number@7.0.0 && node -e 'console.log(require(\"is-number\")(5))'"
	r := w.sbxEnv(t, w.code, env, "exec", "--allow-net", "127.0.0.1:1", "--", install+" </dev/null")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "403") {
		t.Fatalf("npm install without the registry listed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	args := []string{"exec"}
	for _, h := range withLocalAddrs(t, []string{reg.Host}) {
		args = append(args, "--allow-net", h)
	}
	r = w.sbxEnv(t, w.code, env, append(args, "--", install)...)
	if r.code != 0 || !strings.Contains(r.stdout, "true") {
		t.Fatalf("npm install through allow_net %s: exit %d\n%s%s", reg.Host, r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(w.code, "node_modules", "is-number", "package.json")); err != nil {
		t.Fatalf("node_modules did not come back: %v", err)
	}
}

// inject: the proxy adds the header, read on the host, to requests to the
// listed host only (a local HTTPS server on 127.0.0.1 checks it); the
// sandbox cannot read the value in its environment, its files, its
// processes or the proxy's answers.
func TestInjectNeverInSandbox(t *testing.T) {
	const secret = "sbx-test-secret-9f2c41"
	w := newWorld(t)
	var mu sync.Mutex
	var seen []string
	port, env := injectServer(t, w, secret, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "authorized")
	})
	// localhost is in NO_PROXY for the sandbox's own servers; the test's
	// host is the host's, so this curl is told to use the proxy anyway.
	script := "curl -sS --noproxy '' -H 'Authorization: Bearer placeholder' https://localhost:" + port + "/api; echo; " +
		"env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; " +
		// The pattern comes in on stdin, in two pieces, so that no command
		// line holds the value.
		"printf '%s%s\\n' " + secret[:9] + " " + secret[9:] + " | grep -rsf - /etc /home /tmp /run /var " + w.code + " && echo FOUND-IN-''FILES; " +
		"curl -sS --noproxy '' http://localhost:" + port + "/plain; echo; curl -sS --noproxy '' http://127.0.0.1:9/x"
	r := w.sbxEnv(t, w.code, env, "exec", "--session", "inject-secret", "--", script)
	if !strings.Contains(r.stdout, "authorized") {
		t.Fatalf("the request through the proxy was not authorized: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) || strings.Contains(r.stdout, "FOUND-IN-FILES") {
		t.Fatalf("the sandbox read the secret:\n%s%s", r.stdout, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "Bearer "+secret {
		t.Fatalf("the server saw %q", seen)
	}
	// The sandbox trusts the session CA, not the server's own: TLS to the
	// inject host is the proxy's.
	if !strings.Contains(r.stdout, "SSL_CERT_FILE=/etc/sbx/ca-bundle.pem") {
		t.Fatalf("no CA bundle announced:\n%s", r.stdout)
	}
}

// injectServer starts a local HTTPS server for localhost on 127.0.0.1
// serving h, with a certificate from a CA of its own that the proxy's
// process trusts (SSL_CERT_FILE) and the sandbox does not, and writes the
// user's config: allow_net for it and an inject of "Authorization: Bearer
// secret" read from a host file. It returns the port and the environment
// for sbx.
func injectServer(t *testing.T, w *world, secret string, h http.HandlerFunc) (string, []string) {
	t.Helper()
	srvCA, err := egress.NewCA([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := srvCA.Leaf("localhost")
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	roots := filepath.Join(tempDir(t), "roots.pem")
	os.WriteFile(roots, srvCA.CertPEM(), 0o644)
	tokenFile := filepath.Join(tempDir(t), "token")
	os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600)
	cfgDir := filepath.Join(w.home, ".config", "sbx")
	os.MkdirAll(cfgDir, 0o700)
	os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte(fmt.Sprintf(
		"allow_net = [\"localhost:%[1]s\", \"127.0.0.1:%[1]s\", \"[::1]:%[1]s\"]\n\n[[inject]]\nhost = \"localhost\"\nport = %[1]s\nheader = \"Authorization\"\nprefix = \"Bearer \"\nfile = %[2]q\n",
		port, tokenFile)), 0o600)
	return port, []string{"SSL_CERT_FILE=" + roots, "XDG_CACHE_HOME=" + tempDir(t), "SBX_TEST_TOKEN=" + secret}
}

// An inject for a host not in allow_net is refused at start, naming the key
// and the file.
func TestInjectHostNotAllowed(t *testing.T) {
	w := newWorld(t)
	cfgDir := filepath.Join(w.home, ".config", "sbx")
	os.MkdirAll(cfgDir, 0o700)
	cfg := filepath.Join(cfgDir, "config.toml")
	os.WriteFile(cfg, []byte("allow_net = [\"a.example\"]\n[[inject]]\nhost = \"b.example\"\nheader = \"Authorization\"\nenv = \"TOKEN\"\n"), 0o600)
	r := w.sbx(t, w.code, "exec", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, cfg) || !strings.Contains(r.stderr, "inject") || !strings.Contains(r.stderr, "b.example") || !strings.Contains(r.stderr, "not in allow_net") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// A listed host that does not resolve: the claim fails naming allow_net.
	os.WriteFile(cfg, []byte("allow_net = [\"no-such-host.invalid\"]\n"), 0o600)
	r = w.sbx(t, w.code, "exec", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "allow_net: no-such-host.invalid does not resolve") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = w.sbx(t, w.code, "exec", "--allow-net", "*.com", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "--allow-net") || !strings.Contains(r.stderr, "top-level") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
