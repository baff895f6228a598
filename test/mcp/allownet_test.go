package mcptest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestAllowNetFlag: sbx-mcp --allow-net HOST (repeatable) gives the
// sandbox the egress proxy's one way out to the listed hosts, as sbx
// exec's flag does, through the same config key: a server on the host's
// 127.0.0.1 (listed as an address) answers through the proxy; an address
// not listed gets the proxy's refusal naming the flag; a bad value stops
// the server at start naming the flag; without the flag the sandbox has no
// way out at all.
func TestAllowNetFlag(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "host server "+r.URL.Path)
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "other server reached")
	}))
	defer other.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	otherPort := strconv.Itoa(other.Listener.Addr().(*net.TCPAddr).Port)
	// localhost and 127.0.0.1 are in the sandbox's NO_PROXY (for its own
	// servers): these requests are to the host's, so they name the proxy.
	curl := "curl -sS -m 10 --noproxy '' "

	e := newEnv(t)
	c := e.stdio("--allow-net", "127.0.0.1:"+port, "--allow-net", "[::1]:"+port)
	out := c.bash(curl + "http://127.0.0.1:" + port + "/through; echo; " + curl + "http://127.0.0.1:" + otherPort + "/; echo; env | grep -c '^HTTPS_PROXY=' ")
	wantContains(t, out, "host server /through", "--allow-net 127.0.0.1:"+otherPort)
	if strings.Contains(out, "other server reached") {
		t.Fatalf("a port not listed was reached:\n%s", out)
	}

	// Without the flag: no proxy, no way out.
	e2 := newEnv(t)
	c2 := e2.stdio()
	out = c2.bash(curl + "http://127.0.0.1:" + port + "/ 2>&1; echo; env | grep -c PROXY=")
	if strings.Contains(out, "host server") {
		t.Fatalf("reached the host's server without --allow-net:\n%s", out)
	}

	// A bad value: the server does not start, and says which flag.
	e3 := newEnv(t)
	cmd := exec.Command(binary, "--allow-net", "*.com")
	cmd.Dir, cmd.Env = e3.code, e3.vars
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "--allow-net") || !strings.Contains(string(msg), "top-level") {
		t.Fatalf("sbx-mcp --allow-net '*.com': %v, %q", err, msg)
	}
}
