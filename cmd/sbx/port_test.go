package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sbx port: a dev server in a kept session's sandbox (which has no network)
// is reached from the host's loopback; sbx ls lists the forward; releasing
// the session ends it.
func TestPortForward(t *testing.T) {
	w := newWorld(t)
	server := exec.Command(sbxBin, "exec", "--session", "portdev", "--keep", "--",
		`node -e "require('http').createServer((q,s)=>s.end('dev server '+q.url)).listen(3000,'127.0.0.1',()=>console.log('listening'))"`)
	server.Dir, server.Env = w.code, w.env
	sout, _ := server.StdoutPipe()
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer server.Process.Kill()
	if line, err := bufio.NewReader(sout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("dev server: %q %v", line, err)
	}
	fwd := exec.Command(sbxBin, "port", "--session", "portdev", "0:3000")
	fwd.Dir, fwd.Env = w.code, w.env
	fout, _ := fwd.StdoutPipe()
	var ferr strings.Builder
	fwd.Stderr = &ferr
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer fwd.Process.Kill()
	line, err := bufio.NewReader(fout).ReadString('\n')
	m := regexp.MustCompile(`forwarding (127\.0\.0\.1:\d+) to port 3000`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("sbx port said %q (%v), stderr %q", line, err, ferr.String())
	}
	resp, err := http.Get("http://" + m[1] + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "dev server /hello" {
		t.Fatalf("through the forward: %q", body)
	}
	hostPort := strings.TrimPrefix(m[1], "127.0.0.1:")
	if r := w.sbx(t, w.code, "ls"); !strings.Contains(r.stdout, hostPort+"->3000") {
		t.Fatalf("sbx ls does not list the forward:\n%s", r.stdout)
	}
	// A port nothing listens on in the sandbox: the connection is closed
	// and the reason is said.
	fwd2 := exec.Command(sbxBin, "port", "--session", "portdev", "0:3999")
	fwd2.Dir, fwd2.Env = w.code, w.env
	f2out, _ := fwd2.StdoutPipe()
	var f2err strings.Builder
	fwd2.Stderr = &f2err
	fwd2.Start()
	defer fwd2.Process.Kill()
	line, _ = bufio.NewReader(f2out).ReadString('\n')
	if m2 := regexp.MustCompile(`forwarding (127\.0\.0\.1:\d+)`).FindStringSubmatch(line); m2 != nil {
		if _, err := http.Get("http://" + m2[1] + "/"); err == nil {
			t.Fatal("a request to a closed sandbox port got an answer")
		}
	}
	// Releasing the session ends the forwards (the dev server's command
	// is interrupted first: a release waits for a running command).
	server.Process.Signal(os.Interrupt)
	server.Wait()
	if r := w.sbx(t, w.code, "release", "--session", "portdev"); r.code != 0 {
		t.Fatalf("release: %d %s", r.code, r.stderr)
	}
	done := make(chan error, 1)
	go func() { done <- fwd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(ferr.String(), "gone") {
			t.Fatalf("sbx port ended with %v, stderr %q", err, ferr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("sbx port outlived its session")
	}
	if !strings.Contains(f2err.String(), "nothing answers on port 3999") {
		fwd2.Process.Kill()
		fwd2.Wait()
		t.Fatalf("closed port: stderr %q", f2err.String())
	}
}

// sbx proxy: the allowlist proxy on its own serves a listed address and
// refuses another with its message.
func TestProxyCommand(t *testing.T) {
	w := newWorld(t)
	srv := newHelloServer(t)
	p := exec.Command(sbxBin, "proxy", "--listen", "127.0.0.1:0", "--allow-net", srv)
	p.Dir, p.Env = w.code, w.env
	out, _ := p.StdoutPipe()
	var stderr strings.Builder
	p.Stderr = &stderr
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Process.Kill(); p.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("sbx proxy said %q %q", line, stderr.String())
	}
	c := &http.Client{Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse("http://" + m[1]) }}}
	resp, err := c.Get("http://" + srv + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("listed: %d %q", resp.StatusCode, body)
	}
	resp, err = c.Get("http://127.0.0.1:9/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "refused") {
		t.Fatalf("unlisted: %d %q", resp.StatusCode, body)
	}
}

func newHelloServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}
