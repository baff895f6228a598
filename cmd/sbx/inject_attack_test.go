package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// The attacks on the injected header, run by a sandboxed command (curl and
// openssl s_client through the proxy, raw HTTP inside the tunnel): it
// cannot make the server echo the header back (TRACE), name it away
// (Connection), repeat it (its own value, a trailer), or smuggle a request
// past the proxy's framing; the server sees the injected value exactly
// once per request, and the sandbox never sees it.
func TestInjectAttacksFromSandbox(t *testing.T) {
	const secret = "sbx-test-secret-77e1a0"
	w := newWorld(t)
	var mu sync.Mutex
	seen := map[string][]string{}
	port, env := injectServer(t, w, secret, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = append(r.Header.Values("Authorization"), r.Trailer.Values("Authorization")...)
		mu.Unlock()
		if r.Method == "TRACE" {
			// What a server that implements TRACE does: the request back.
			r.Header.Write(w)
			return
		}
		fmt.Fprintf(w, "ok %s %s\n", r.Method, r.URL.Path)
	})
	// Raw requests inside the terminated tunnel, the last one closing it.
	raw := "GET /dup HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer one\r\nauthorization: Bearer two\r\n\r\n" +
		"POST /trailer HTTP/1.1\r\nHost: localhost\r\nTrailer: Authorization\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nAuthorization: Bearer fake\r\n\r\n" +
		"POST /smuggle HTTP/1.1\r\nHost: localhost\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /inner HTTP/1.1\r\nHost: localhost\r\n\r\n" +
		"GET /last HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
	script := "curl -sS --noproxy '' -X TRACE https://localhost:" + port + "/trace; echo; " +
		"curl -sS --noproxy '' -H 'Connection: Authorization' -H 'Authorization: Bearer mine' https://localhost:" + port + "/conn; echo; " +
		"printf '" + strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(raw) + "' | openssl s_client -quiet -proxy 127.0.0.1:3128 -connect localhost:" + port +
		" -servername localhost -CAfile /etc/sbx/ca.pem -verify_return_error 2>&1"
	r := w.sbxEnv(t, w.code, env, "exec", "--session", "inject-attack", "--", script)
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
		t.Fatalf("the sandbox read the injected value:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "TRACE is refused") || !strings.Contains(r.stdout, "ok GET /conn") || !strings.Contains(r.stdout, "ok GET /last") {
		t.Fatalf("the sandbox's view: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := seen["TRACE /trace"]; ok {
		t.Fatalf("the TRACE reached the server")
	}
	for _, req := range []string{"GET /conn", "GET /dup", "POST /trailer", "POST /smuggle", "GET /inner", "GET /last"} {
		if v := seen[req]; len(v) != 1 || v[0] != "Bearer "+secret {
			t.Errorf("%s: the server saw Authorization %q (header and trailer), want the injected value once", req, v)
		}
	}
	if len(seen) != 6 {
		t.Errorf("the server saw %d requests, want the 6 the proxy read: %v", len(seen), keys(seen))
	}
	if t.Failed() {
		t.Logf("sandbox output:\n%s%s", r.stdout, r.stderr)
	}
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprint(k))
	}
	return out
}
