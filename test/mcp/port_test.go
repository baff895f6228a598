package mcptest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// devServer is a node HTTP server on 127.0.0.1:port in the sandbox,
// answering "dev <url>", started as a background job.
func devServer(t *testing.T, c *client, port int) string {
	t.Helper()
	res := c.call("bash", map[string]any{
		"command":           fmt.Sprintf(`exec node -e "require('http').createServer((q,s)=>s.end('dev '+q.url)).listen(%d,'127.0.0.1',()=>console.log('listening'))"`, port),
		"run_in_background": true,
	})
	if res.IsError {
		t.Fatalf("start the dev server: %s", text(res))
	}
	id := structured(t, res)["id"].(string)
	c.waitOutput(id, "listening")
	return id
}

func httpGet(url string) (string, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// portForwards is the port tool's structured list.
func portForwards(t *testing.T, res *mcp.CallToolResult) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, f := range structured(t, res)["forwards"].([]any) {
		out = append(out, f.(map[string]any))
	}
	return out
}

// TestPortTool: a dev server started by bash (run_in_background) in a
// sandbox with no network answers on the host port the port tool gives;
// sbx ls's record is there while it runs; stop ends it; a second forward
// ends with the session's release, and the next sandbox starts without
// forwards.
func TestPortTool(t *testing.T) {
	e := newEnv(t)
	c := e.stdio("--session", "porttool")
	devServer(t, c, 3000)

	res := c.call("port", map[string]any{"sandbox_port": 3000})
	if res.IsError {
		t.Fatalf("port: %s", text(res))
	}
	fw := portForwards(t, res)
	if len(fw) != 1 || fw[0]["sandbox_port"].(float64) != 3000 {
		t.Fatalf("forwards: %v", fw)
	}
	url, addr := fw[0]["url"].(string), fw[0]["host_addr"].(string)
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Fatalf("the forward listens on %s, want 127.0.0.1 only", addr)
	}
	wantContains(t, text(res), "Forwarding "+url+"/")
	if strings.Contains(text(res), "nothing answers") {
		t.Errorf("a listening server reported as absent: %s", text(res))
	}
	if got, err := httpGet(url + "/hello"); err != nil || got != "dev /hello" {
		t.Fatalf("through the forward: %q %v", got, err)
	}
	// The sandbox itself still has no network: the host's forward is not
	// reachable from inside on the host's port (its loopback is its own).
	_, hostPort, _ := net.SplitHostPort(addr)
	if out := c.bash("curl -s -m 2 http://127.0.0.1:" + hostPort + "/ && echo reached || echo unreachable"); !strings.Contains(out, "unreachable") {
		t.Errorf("the sandbox reached the host's forward port: %s", out)
	}
	// The record sbx ls reads (portfwd's, in the session's state dir).
	recs, _ := os.ReadDir(filepath.Join(e.state, "sbx", "sessions", "porttool", "ports"))
	if len(recs) != 1 || recs[0].Name() != hostPort+".json" {
		t.Errorf("port records: %v", recs)
	}
	// Asking again gives the same forward.
	again := c.ok("port", map[string]any{"sandbox_port": 3000})
	wantContains(t, again, "already forwarded: "+url)
	// A port nothing listens on: forwarded, with a note.
	wantContains(t, c.ok("port", map[string]any{"sandbox_port": 3999}), "nothing answers on port 3999")
	if got := portForwards(t, c.call("port", nil)); len(got) != 2 {
		t.Fatalf("list: %v", got)
	}
	// stop ends it: the host port no longer answers.
	wantContains(t, c.ok("port", map[string]any{"sandbox_port": 3000, "stop": true}), "Ended the forward to sandbox port 3000")
	if _, err := httpGet(url + "/"); err == nil {
		t.Fatalf("%s still answers after stop", url)
	}
	wantContains(t, c.fails("port", map[string]any{"sandbox_port": 3000, "stop": true}), "no forward to sandbox port 3000")

	// A new forward ends with the release of the session's sandbox.
	fw = portForwards(t, c.call("port", map[string]any{"sandbox_port": 3000}))
	var url2 string
	for _, f := range fw {
		if f["sandbox_port"].(float64) == 3000 {
			url2 = f["url"].(string)
		}
	}
	if got, err := httpGet(url2 + "/again"); err != nil || got != "dev /again" {
		t.Fatalf("second forward: %q %v", got, err)
	}
	c.ok("release", nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url2, "http://"), time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 10s after the release", url2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.bash("true") // a new sandbox
	if got := portForwards(t, c.call("port", nil)); len(got) != 0 {
		t.Fatalf("the new sandbox has the old one's forwards: %v", got)
	}
}

// TestPortToolRefusals: what the sandboxed agent might try. It cannot pick
// the host port (a well-known one taken before the host's service starts
// would receive what host clients send it), ports out of range and a
// forward before any sandbox are refused with the reason, and a session
// has at most 16 forwards.
func TestPortToolRefusals(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	wantContains(t, c.fails("port", map[string]any{"sandbox_port": 3000}), "no sandbox yet", "run_in_background")
	// The schema has no host_port: the SDK refuses the argument.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "port", Arguments: map[string]any{"sandbox_port": 3000, "host_port": free}})
	if err == nil && !res.IsError {
		t.Fatalf("host_port accepted: %s", text(res))
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", free), time.Second); err == nil {
		conn.Close()
		t.Fatalf("something listens on the host port the agent asked for (%d)", free)
	}
	c.bash("true")
	for _, p := range []int{-1, 65536, 100000} {
		wantContains(t, c.fails("port", map[string]any{"sandbox_port": p}), "out of range")
	}
	wantContains(t, c.fails("port", map[string]any{"stop": true}), "stop needs the sandbox_port")
	for p := 4001; p <= 4016; p++ {
		c.ok("port", map[string]any{"sandbox_port": p})
	}
	wantContains(t, c.fails("port", map[string]any{"sandbox_port": 4017}), "already has 16 forwards")
	// One already forwarded is still answered, not counted again.
	wantContains(t, c.ok("port", map[string]any{"sandbox_port": 4001}), "already forwarded")
}
