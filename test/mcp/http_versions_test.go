package mcptest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recorder adds the token (and extra headers) to every request and keeps
// the protocol headers that went each way.
type recorder struct {
	bearer
	mu        sync.Mutex
	versions  map[string]bool // MCP-Protocol-Version values sent
	sessionID bool            // a response carried Mcp-Session-Id
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.versions[req.Header.Get("MCP-Protocol-Version")] = true
	r.mu.Unlock()
	resp, err := r.bearer.RoundTrip(req)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		r.mu.Lock()
		r.sessionID = true
		r.mu.Unlock()
	}
	return resp, err
}

func (s *server) connectVersion(t *testing.T, version string, extra http.Header) (*client, *recorder) {
	t.Helper()
	rec := &recorder{bearer: bearer{token: s.token, extra: extra}, versions: map[string]bool{}}
	c := &client{t: t, stderr: s.stderr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: &http.Client{Transport: rec}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sbx-test"}, clientOptions(c)).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect with MCP %s: %v", version, err)
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	return c, rec
}

// TestHTTPProtocolVersions: clients of 2025-06-18, 2025-11-25 and the
// stateless 2026-07-28 get their own version, and a stateless client keeps
// its sandbox between requests (by its Sbx-Session header, else its token)
// without sharing it with another.
func TestHTTPProtocolVersions(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	for _, v := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			c, rec := s.connectVersion(t, v, http.Header{"Sbx-Session": {"client-" + v}})
			if got := c.cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s, want %s", got, v)
			}
			dir := "/tmp/v" + v
			c.bash("mkdir -p " + dir + " && cd " + dir)
			wantContains(t, c.bash("pwd"), dir+"\n")
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if stateless := v == "2026-07-28"; rec.sessionID == stateless {
				t.Errorf("Mcp-Session-Id in a response: %v, want %v", rec.sessionID, !stateless)
			}
			if !rec.versions[v] {
				t.Errorf("the client never sent MCP-Protocol-Version %s: %v", v, rec.versions)
			}
		})
	}
	t.Run("stateless clients do not share", func(t *testing.T) {
		a, _ := s.connectVersion(t, "2026-07-28", http.Header{"Sbx-Session": {"a"}})
		b, _ := s.connectVersion(t, "2026-07-28", http.Header{"Sbx-Session": {"b"}})
		a.bash("mkdir -p /tmp/only-a && cd /tmp/only-a")
		if got := b.bash("pwd; ls /tmp/only-a 2>&1 || true"); strings.Contains(got, "/tmp/only-a\n") || !strings.Contains(got, "No such file") {
			t.Errorf("b sees a's sandbox: %s", got)
		}
		wantContains(t, a.bash("pwd"), "/tmp/only-a\n")
	})
	t.Run("2026-07-28 without Sbx-Session falls back to a session", func(t *testing.T) {
		c, rec := s.connectVersion(t, "2026-07-28", nil)
		if got := c.cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
			t.Errorf("negotiated %s, want the fallback to 2025-11-25", got)
		}
		c.bash("true")
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if !rec.sessionID {
			t.Error("no Mcp-Session-Id: the client has no session of its own")
		}
	})
}

// TestHTTPJSONRPCErrors: malformed JSON gets a JSON-RPC parse error, and a
// batch is refused in a session of a version without batching, served in
// one of 2025-03-26.
func TestHTTPJSONRPCErrors(t *testing.T) {
	e := newEnv(t)
	s := e.http(testToken)
	post := func(body string, hdr map[string]string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+testToken)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b), resp.Header
	}
	rpcError := func(body string) (code int, msg string) {
		var r struct {
			JSONRPC string `json:"jsonrpc"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("not a JSON-RPC response: %q (%v)", body, err)
		}
		return r.Error.Code, r.Error.Message
	}
	status, body, hdr := post(`{"jsonrpc":`, nil)
	if code, _ := rpcError(body); status != 400 || code != -32700 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Errorf("malformed JSON: %d %s %q", status, hdr.Get("Content-Type"), body)
	}
	initialize := func(v string) string {
		status, body, hdr := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
		if status != 200 || hdr.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize %s: %d %q", v, status, body)
		}
		post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": hdr.Get("Mcp-Session-Id"), "MCP-Protocol-Version": v})
		return hdr.Get("Mcp-Session-Id")
	}
	batch := `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`
	id := initialize("2025-06-18")
	status, body, _ = post(batch, map[string]string{"Mcp-Session-Id": id})
	if code, msg := rpcError(body); status != 400 || code != -32600 || !strings.Contains(msg, "batches were removed in MCP 2025-06-18") {
		t.Errorf("a batch in a 2025-06-18 session: %d %q", status, body)
	}
	id = initialize("2025-03-26")
	status, body, _ = post(batch, map[string]string{"Mcp-Session-Id": id})
	if status != 200 || !strings.Contains(body, `"id":2`) || !strings.Contains(body, `"id":3`) {
		t.Errorf("a batch in a 2025-03-26 session: %d %q", status, body)
	}
}
