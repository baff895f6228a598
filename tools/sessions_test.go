package tools

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/session"
)

func TestHTTPKey(t *testing.T) {
	req := func(scope, header string) *mcp.CallToolRequest {
		h := http.Header{}
		if header != "" {
			h.Set(SessionHeader, header)
		}
		return &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: scope}, Header: h}}
	}
	a, err := HTTPKey(req("scope-a", "client-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := session.CheckName(a); err != nil {
		t.Fatalf("key %q is not a session name: %v", a, err)
	}
	if again, _ := HTTPKey(req("scope-a", "client-1")); again != a {
		t.Fatalf("same client, keys %q and %q", a, again)
	}
	for name, r := range map[string]*mcp.CallToolRequest{
		"another token":  req("scope-b", "client-1"),
		"another client": req("scope-a", "client-2"),
	} {
		if k, _ := HTTPKey(r); k == a {
			t.Errorf("%s shares the key %q", name, k)
		}
	}
	if _, err := HTTPKey(req("scope-a", "")); err == nil || !strings.Contains(err.Error(), SessionHeader) {
		t.Fatalf("no id, no header: %v", err)
	}
}

func TestTokenScope(t *testing.T) {
	s := TokenScope("secret-token-value")
	if strings.Contains(s, "secret") || len(s) != 16 || s != TokenScope("secret-token-value") || s == TokenScope("other-token-value") {
		t.Fatalf("scope %q", s)
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true,
		"0.0.0.0": false, "10.0.0.1": false, "example.com": false, "localhost.evil.com": false, "": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v", host, got)
		}
	}
}
