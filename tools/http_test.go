package tools

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzCheckBody feeds the HTTP body check arbitrary bodies under two
// protocol versions. The oracle is encoding/json and the version rule: a
// body that is not JSON gets a parse error, a batch is refused exactly when
// the version removed batching, and a body passed on reaches the SDK byte
// for byte.
func FuzzCheckBody(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), true)
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), false)
	f.Add([]byte(`{"jsonrpc":`), true)
	f.Add([]byte(` [1] `), true)
	server := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	f.Fuzz(func(t *testing.T, body []byte, modern bool) {
		version := "2025-03-26"
		if modern {
			version = "2025-06-18"
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		r.Header.Set("MCP-Protocol-Version", version)
		w := httptest.NewRecorder()
		ok := checkBody(w, r, server, 1<<20)
		trimmed := bytes.TrimSpace(body)
		var code int
		if !ok {
			var resp struct {
				JSONRPC string `json:"jsonrpc"`
				Error   struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" || w.Code != 400 {
				t.Fatalf("refusal is not a JSON-RPC error: %d %q", w.Code, w.Body)
			}
			code = resp.Error.Code
		}
		// Syntax is what decides a parse error: "1E1000" is valid JSON that
		// a float64 cannot hold (json.Unmarshal into any refuses it), and
		// answers as any other non-request does.
		valid := len(trimmed) == 0 || json.Valid(trimmed)
		isBatch := valid && len(trimmed) > 0 && trimmed[0] == '['
		if isBatch {
			var v []json.RawMessage
			isBatch = json.Unmarshal(trimmed, &v) == nil
		}
		switch {
		case !valid:
			if ok || code != -32700 {
				t.Fatalf("invalid JSON %q: passed %v, code %d", body, ok, code)
			}
		case isBatch && modern:
			if ok || code != -32600 {
				t.Fatalf("batch under %s %q: passed %v, code %d", version, body, ok, code)
			}
		case isBatch:
			if !ok {
				t.Fatalf("batch under %s refused: %q", version, body)
			}
		case len(trimmed) == 0:
			if !ok {
				t.Fatal("an empty body is the SDK's to refuse")
			}
		}
		if ok {
			got, _ := io.ReadAll(r.Body)
			if !bytes.Equal(got, body) {
				t.Fatalf("body passed on changed: %q -> %q", body, got)
			}
		}
	})
}
