//go:build e2e

package clustere2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sbx port on the cluster: a server in a kept session's pod (busybox
// httpd on the pod's 127.0.0.1) answers on the host's loopback through the
// helper's exec (under gVisor too, where the kubelet's port-forward cannot
// reach it); releasing the session ends the forward.
func TestPortForwardToPod(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	server := exec.CommandContext(ctx, filepath.Join(w.bin, "sbx"), "exec", "--session", "e2e-port", "--keep", "--",
		"mkdir -p /tmp/www && echo dev-in-pod > /tmp/www/index.html && echo listening && exec httpd -f -p 127.0.0.1:3000 -h /tmp/www")
	server.Dir, server.Env = w.code, w.env
	sout, _ := server.StdoutPipe()
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { server.Process.Kill(); server.Wait() }()
	if line, err := bufio.NewReader(sout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("server: %q %v", line, err)
	}
	fwd := exec.CommandContext(ctx, filepath.Join(w.bin, "sbx"), "port", "--session", "e2e-port", "0:3000")
	fwd.Dir, fwd.Env = w.code, w.env
	fout, _ := fwd.StdoutPipe()
	ferr := &lockedBuilder{}
	fwd.Stderr = ferr
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer fwd.Process.Kill()
	fr := bufio.NewReader(fout)
	line, err := fr.ReadString('\n')
	fwdDone := make(chan error, 1)
	go func() { io.Copy(io.Discard, fr); fwdDone <- fwd.Wait() }()
	m := regexp.MustCompile(`forwarding (127\.0\.0\.1:\d+) to port 3000`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("sbx port said %q (%v), stderr %q", line, err, ferr.String())
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	var body string
	// httpd may still be starting after its echo: retry until a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := cl.Get("http://" + m[1] + "/index.html")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if body == "dev-in-pod\n" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("through the forward: %q %v; sbx port stderr %q", body, err, ferr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, _, _ := w.sbx("ls"); !strings.Contains(out, strings.TrimPrefix(m[1], "127.0.0.1:")+"->3000") {
		t.Errorf("sbx ls does not list the forward:\n%s", out)
	}
	// Releasing the session ends the forward.
	server.Process.Kill()
	server.Wait()
	if out, errs, code := w.sbx("release", "--session", "e2e-port"); code != 0 {
		t.Fatalf("release: %d %q %q", code, out, errs)
	}
	select {
	case <-fwdDone:
	case <-time.After(60 * time.Second):
		t.Fatalf("sbx port still runs 60s after the release; stderr %q", ferr.String())
	}
	if !strings.Contains(ferr.String(), "gone") {
		t.Errorf("sbx port did not say the sandbox is gone: %q", ferr.String())
	}
}

// The MCP port tool on a cluster session: a server started by bash with
// run_in_background in the pod answers on the host URL the tool gives; the
// release tool ends the forward.
func TestPortToolOnTheCluster(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.Command(filepath.Join(w.bin, "sbx-mcp"))
	cmd.Dir, cmd.Env = w.code, w.env
	mcpErr := &lockedBuilder{}
	cmd.Stderr = io.MultiWriter(os.Stderr, mcpErr)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s %v: %v %+v", name, args, err, res)
		}
		return res
	}
	call("bash", map[string]any{"command": "mkdir -p /tmp/www && echo mcp-in-pod > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:3000 -h /tmp/www", "run_in_background": true})
	res := call("port", map[string]any{"sandbox_port": 3000})
	raw, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Forwards []struct {
			URL      string `json:"url"`
			HostAddr string `json:"host_addr"`
		} `json:"forwards"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Forwards) != 1 {
		t.Fatalf("port: %s %v", raw, err)
	}
	url, addr := out.Forwards[0].URL, out.Forwards[0].HostAddr
	cl := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := cl.Get(url + "/index.html")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) == "mcp-in-pod\n" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	call("release", nil)
	deadline = time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 60s after the release", addr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lockedBuilder is a process's stderr, read while it runs.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
