package tools

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPPath is the MCP endpoint.
const HTTPPath = "/mcp"

// HTTPOptions configure the HTTP endpoint.
type HTTPOptions struct {
	// Token is the bearer token every request must carry. Required.
	Token string
	// Addr is the address the server listens on (host:port, port resolved).
	// On a loopback address, the Host header must name a loopback host
	// with this port (DNS rebinding protection).
	Addr string
	// SessionTimeout closes an MCP session that has sent nothing for this
	// long (zero: never); its sandbox goes with it.
	SessionTimeout time.Duration
	// MaxBodyBytes bounds a request body (zero: 20 MiB).
	MaxBodyBytes int64
	Log          *slog.Logger
}

// IsLoopback reports whether host (a name or an IP, without port) is this
// machine's loopback.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// NewHTTPHandler serves server at HTTPPath over Streamable HTTP, behind the
// checks every request must pass, in order: a Host naming this server, an
// Origin (when present) of this server, and the bearer token.
func NewHTTPHandler(server *mcp.Server, o HTTPOptions) (http.Handler, error) {
	if o.Token == "" {
		return nil, fmt.Errorf("an HTTP server needs a bearer token")
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", o.Addr, err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = MaxContentBytes + 4<<20
	}
	loopback := IsLoopback(host)
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		SessionTimeout: o.SessionTimeout, MaxRequestBodyBytes: o.MaxBodyBytes, Logger: o.Log,
	})
	scope := TokenScope(o.Token)
	want := []byte(o.Token)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(token), want) != 1 {
			return nil, fmt.Errorf("%w: wrong bearer token", auth.ErrInvalidToken)
		}
		// UserID binds each MCP session to the token that opened it.
		return &auth.TokenInfo{UserID: scope}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := checkHost(r, loopback, port); msg != "" {
			o.Log.Warn("http request refused", "reason", msg, "remote", r.RemoteAddr)
			http.Error(w, "sbx-mcp: refused: "+msg, http.StatusForbidden)
			return
		}
		if msg := checkOrigin(r, loopback); msg != "" {
			o.Log.Warn("http request refused", "reason", msg, "remote", r.RemoteAddr)
			http.Error(w, "sbx-mcp: refused: "+msg, http.StatusForbidden)
			return
		}
		fields := strings.Fields(r.Header.Get("Authorization"))
		if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "sbx-mcp: missing bearer token: send the header `Authorization: Bearer <token>` with the token sbx-mcp was given (SBX_TOKEN or --token-file) or printed at start", http.StatusUnauthorized)
			return
		}
		if subtle.ConstantTimeCompare([]byte(fields[1]), want) != 1 {
			o.Log.Warn("http request refused", "reason", "wrong bearer token", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "sbx-mcp: wrong bearer token", http.StatusUnauthorized)
			return
		}
		authed.ServeHTTP(w, r)
	}))
	return mux, nil
}

// checkHost refuses a Host header that does not name this server: a web page
// whose DNS name was rebound to 127.0.0.1 sends its own name.
func checkHost(r *http.Request, loopback bool, port string) string {
	if !loopback {
		return ""
	}
	h, p, err := net.SplitHostPort(r.Host)
	if err != nil {
		h, p = r.Host, "80"
	}
	if !IsLoopback(h) || p != port {
		return fmt.Sprintf("Host %q is not this server's loopback address (port %s): requests must come to localhost, 127.0.0.1 or [::1] (DNS rebinding protection)", r.Host, port)
	}
	return ""
}

// checkOrigin refuses requests from web pages of other origins: a browser
// sends Origin, a local agent does not (or sends this server's own).
func checkOrigin(r *http.Request, loopback bool) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	bad := fmt.Sprintf("Origin %q is not this server: browsers may only call sbx-mcp from its own origin", origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
		return bad
	}
	if loopback && !IsLoopback(u.Hostname()) {
		return bad
	}
	return ""
}
