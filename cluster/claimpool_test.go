package cluster

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sbx-sh/sbx/sandbox"
)

// A v1beta1 claim is created while the pool is read (Claim): when the pool
// turns out to be missing, the error says so and the claim just made is
// deleted again, as if it had never been created.
func TestClaimV1beta1MissingPoolLeavesNoClaim(t *testing.T) {
	f := newFakeCluster(t, "v1beta1")
	p := NewForClients(Config{Pool: "nope", Owner: "bob"}, nil, f.kube, f.ext, f.core, f.disc, nil)
	_, err := p.Claim(context.Background(), sandbox.Spec{Name: "s", StateDir: t.TempDir()})
	var pe *PoolNotFoundError
	if !errors.As(err, &pe) {
		t.Fatalf("missing pool: %v, want a PoolNotFoundError", err)
	}
	list, err := f.ext.ExtensionsV1beta1().SandboxClaims("sbx").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d claims left for a pool that does not exist: %v", len(list.Items), list.Items[0].Name)
	}
}
