package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// A server that refuses the WebSocket upgrade (an API server or proxy
// without WebSocket exec) gets the exec again over SPDY, and later commands
// go straight to SPDY. client-go's WebSocket transport reports the refusal as
// k8s.io/streaming's UpgradeFailureError; the apimachinery copy of
// IsUpgradeFailure does not know that type, so the fallback never happened.
func TestStreamExecFallsBackToSPDY(t *testing.T) {
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		http.Error(w, "no streaming upgrade here", http.StatusBadRequest)
	}))
	defer srv.Close()
	a := &api{rest: &rest.Config{Host: srv.URL}}
	u, err := url.Parse(srv.URL + "/api/v1/namespaces/ns/pods/p/exec?command=true&stdout=true")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.streamExec(ctx, u, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil {
		t.Fatal("exec against a server that refuses both upgrades succeeded")
	}
	mu.Lock()
	got := slices.Clone(methods)
	mu.Unlock()
	if !slices.Equal(got, []string{"GET", "POST"}) {
		t.Fatalf("requests %v, want [GET POST]: the WebSocket exec (GET) refused with 400 must be tried again over SPDY (POST)", got)
	}
	if !a.spdyOnly.Load() {
		t.Fatal("after a refused WebSocket upgrade, later commands must go straight to SPDY")
	}
}
