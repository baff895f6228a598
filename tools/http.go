package tools

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP protocol revisions the HTTP endpoint tells apart.
const (
	// VersionNoBatch removed JSON-RPC batching.
	VersionNoBatch = "2025-06-18"
	// VersionStateless is the stateless revision: no initialize, no
	// Mcp-Session-Id; every request says its version in MCP-Protocol-Version.
	VersionStateless = "2026-07-28"
	// versionLegacyLatest is what the SDK negotiates for an initialize
	// asking for a version it does not know.
	versionLegacyLatest = "2025-11-25"
)

// legacyVersions are the revisions with initialize that the SDK serves.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

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
	getServer := func(*http.Request) *mcp.Server { return server }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		SessionTimeout: o.SessionTimeout, MaxRequestBodyBytes: o.MaxBodyBytes, Logger: o.Log,
	})
	// The stateless revision's requests (no initialize, no session id) that
	// name their sbx session in the Sbx-Session header go to a stateless
	// handler. Without the header nothing would tell two clients of one
	// token apart, so they go to the stateful one, which refuses them as
	// SEP-2575 says, listing the versions with sessions: the client then
	// falls back to initialize (the Go SDK's does) and gets a session of
	// its own.
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, MaxRequestBodyBytes: o.MaxBodyBytes, Logger: o.Log,
		PropagateRequestCancellation: true,
	})
	streamable := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isStateless(r) {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
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
	refusals := &refusalLog{}
	mux := http.NewServeMux()
	// A refused request ends its connection (refuse): kept alive, it let
	// a client without the token hold sbx-mcp's sockets without end (the
	// server bounds the wait for a header, not the idle time between
	// requests).
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse(w, http.StatusNotFound, "sbx-mcp: not found: the MCP endpoint is "+HTTPPath)
	}))
	mux.Handle(HTTPPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := checkHost(r, loopback, port); msg != "" {
			refusals.log(o.Log, msg, r.RemoteAddr)
			refuse(w, http.StatusForbidden, "sbx-mcp: refused: "+msg)
			return
		}
		if msg := checkOrigin(r, loopback); msg != "" {
			refusals.log(o.Log, msg, r.RemoteAddr)
			refuse(w, http.StatusForbidden, "sbx-mcp: refused: "+msg)
			return
		}
		fields := strings.Fields(r.Header.Get("Authorization"))
		if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
			w.Header().Set("WWW-Authenticate", "Bearer")
			refuse(w, http.StatusUnauthorized, "sbx-mcp: missing bearer token: send the header `Authorization: Bearer <token>` with the token sbx-mcp was given (SBX_TOKEN or --token-file) or printed at start")
			return
		}
		if subtle.ConstantTimeCompare([]byte(fields[1]), want) != 1 {
			refusals.log(o.Log, "wrong bearer token", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			refuse(w, http.StatusUnauthorized, "sbx-mcp: wrong bearer token")
			return
		}
		if r.Method == http.MethodPost && !checkBody(w, r, server, o.MaxBodyBytes) {
			return
		}
		authed.ServeHTTP(w, r)
	}))
	return mux, nil
}

// RefusalLogEvery bounds the log of refused requests: one line, then at
// most one more each RefusalLogEvery, counting those not logged (anyone who
// can reach the port can send refused requests as fast as it likes, and the
// log is the MCP client's file).
const RefusalLogEvery = time.Minute

type refusalLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *refusalLog) log(log *slog.Logger, reason, remote string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && time.Since(l.last) < RefusalLogEvery {
		l.suppressed++
		return
	}
	log.Warn("http request refused", "reason", reason, "remote", remote, "not_logged_since_last", l.suppressed)
	l.last, l.suppressed = time.Now(), 0
}

// refuse answers a request that does not reach the MCP handler and closes
// its connection after the answer.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// isStateless tells a request of the stateless revision that sbx serves
// statelessly: it names that version (or a later one), no MCP session, and
// its sbx session in the Sbx-Session header.
func isStateless(r *http.Request) bool {
	v := r.Header.Get("MCP-Protocol-Version")
	return v >= VersionStateless && r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get(SessionHeader) != ""
}

// checkBody answers, as JSON-RPC, a POST body the SDK would refuse with a
// plain-text 400: one that is not JSON (a parse error), not a JSON-RPC
// message, or a batch in a session whose protocol version removed
// batching. It reports whether the request goes on, with its body intact.
func checkBody(w http.ResponseWriter, r *http.Request, server *mcp.Server, limit int64) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("sbx-mcp: request body over %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return false
		}
		http.Error(w, "sbx-mcp: failed to read the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) == 0:
		return true // the SDK says a POST needs a body
	case !json.Valid(trimmed):
		writeRPCError(w, nil, jsonrpc.CodeParseError, "Parse error: the request body is not valid JSON")
		return false
	case trimmed[0] == '[':
		v := batchVersion(r, server, trimmed)
		if v >= VersionNoBatch {
			writeRPCError(w, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: JSON-RPC batches were removed in MCP %s and this request is of MCP %s: send one message per request", VersionNoBatch, v))
			return false
		}
		return true
	}
	if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(trimmed, &probe)
		writeRPCError(w, probe.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message: "+err.Error())
		return false
	}
	return true
}

// batchVersion is the protocol version a batch is sent under: the
// MCP-Protocol-Version header, else the version its MCP session
// negotiated, else the one an initialize in the batch asks for, else
// 2025-03-26 (the last revision with batching, which sent no header).
func batchVersion(r *http.Request, server *mcp.Server, batch []byte) string {
	if v := r.Header.Get("MCP-Protocol-Version"); v != "" {
		return v
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		for ss := range server.Sessions() {
			if ss.ID() == id {
				if p := ss.InitializeParams(); p != nil {
					return negotiated(p.ProtocolVersion)
				}
			}
		}
	}
	var msgs []struct {
		Method string `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if json.Unmarshal(batch, &msgs) == nil {
		for _, m := range msgs {
			if m.Method == "initialize" {
				return negotiated(m.Params.ProtocolVersion)
			}
		}
	}
	return "2025-03-26"
}

// negotiated is the version the SDK answers an initialize asking for v.
func negotiated(v string) string {
	for _, l := range legacyVersions {
		if v == l {
			return v
		}
	}
	return versionLegacyLatest
}

// writeRPCError answers a request with a JSON-RPC error (HTTP 400), its id
// echoed when it is a valid one, else null.
func writeRPCError(w http.ResponseWriter, rawID json.RawMessage, code int64, msg string) {
	id := rpcID(rawID)
	data, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(data)
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
