package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sbx-sh/sbx/sandbox"
)

// A service account that may create claims but not watch them gets the
// RBAC error at once, not a claim timeout minutes later, and its claim is
// deleted.
func TestWaitReadyForbiddenWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeCluster(t, "v1alpha1", pool("p", "busybox", 1))
	deny := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: GroupExtensions, Resource: "sandboxclaims"}, "", errors.New("cannot watch"))
	}
	f.ext.PrependWatchReactor("sandboxclaims", func(a k8stesting.Action) (bool, watch.Interface, error) {
		_, _, err := deny(a)
		return true, nil, err
	})
	f.ext.PrependReactor("list", "sandboxclaims", deny)
	p := NewForClients(Config{Pool: "p", Owner: "alice", ClaimTimeout: 60 * time.Second}, nil, f.kube, f.ext, f.core, f.disc, nil)
	start := time.Now()
	_, err := p.Claim(ctx, sandbox.Spec{Name: "s", StateDir: t.TempDir()})
	var fe *ForbiddenError
	if !errors.As(err, &fe) || time.Since(start) > 20*time.Second {
		t.Fatalf("after %s: %v; want a ForbiddenError at once", time.Since(start).Round(time.Millisecond), err)
	}
	deleted := false
	for _, a := range f.ext.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "sandboxclaims" {
			deleted = true
		}
	}
	if !deleted {
		t.Error("the claim was not deleted")
	}
}

// A watch that breaks is taken up again (RetryWatcher watches again from
// the last version it saw), and the claim is still seen Ready; the
// hand-rolled loop gave up and deleted the claim.
func TestWaitReadyWatchBreaks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeCluster(t, "v1alpha1", pool("p", "busybox", 1))
	var watches atomic.Int32
	f.ext.PrependWatchReactor("sandboxclaims", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if watches.Add(1) == 1 {
			return true, nil, apierrors.NewInternalError(errors.New("etcd hiccup"))
		}
		return false, nil, nil
	})
	f.controller(t, ctx)
	p := NewForClients(Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 30 * time.Second}, nil, f.kube, f.ext, f.core, f.disc, nil)
	sb, err := p.Claim(ctx, sandbox.Spec{Name: "s", StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("a claim whose first watch failed: %v", err)
	}
	if watches.Load() < 1 {
		t.Error("no watch was tried: the test does not test a broken watch")
	}
	if _, err := f.ext.ExtensionsV1alpha1().SandboxClaims("sbx").Get(ctx, sb.(*Sandbox).Claim(), metav1.GetOptions{}); err != nil {
		t.Errorf("claim: %v", err)
	}
}

// claimLists counts the lists of claims that select one claim by name: the
// provider's (the fake controller lists every claim).
func claimLists(f *fakeCluster) int {
	n := 0
	for _, a := range f.ext.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "sandboxclaims" && !l.GetListRestrictions().Fields.Empty() {
			n++
		}
	}
	return n
}

// A claim is watched from the resourceVersion its create returned, with no
// list first: the informer's list and its wait for a synced cache
// (cache.WaitForCacheSync polls every 100 ms) cost each claim 60 ms after
// it was Ready on the lab cluster.
func TestWaitReadyWatchesFromCreate(t *testing.T) {
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFakeCluster(t, v, pool("p", "busybox", 1))
			var fromRV atomic.Int32
			f.ext.PrependWatchReactor("sandboxclaims", func(a k8stesting.Action) (bool, watch.Interface, error) {
				if w, ok := a.(k8stesting.WatchActionImpl); ok && w.WatchRestrictions.ResourceVersion != "" {
					fromRV.Add(1)
				}
				return false, nil, nil
			})
			f.controller(t, ctx)
			p := NewForClients(Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 30 * time.Second}, nil, f.kube, f.ext, f.core, f.disc, nil)
			if _, err := p.Claim(ctx, sandbox.Spec{Name: "s", StateDir: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			if n := claimLists(f); n != 0 {
				t.Errorf("the claim's wait listed claims %d times; want a watch from the create's version only", n)
			}
			if fromRV.Load() == 0 {
				t.Error("no watch of the claims named a resourceVersion")
			}
		})
	}
}

// A watch refused because its version is too old (410 Gone, as an error or
// as an event) falls back to the informer, which lists first, and the claim
// is still seen Ready.
func TestWaitReadyVersionExpired(t *testing.T) {
	for _, how := range []string{"error", "event"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFakeCluster(t, "v1beta1", pool("p", "busybox", 1))
			var refused atomic.Int32
			f.ext.PrependWatchReactor("sandboxclaims", func(a k8stesting.Action) (bool, watch.Interface, error) {
				w, ok := a.(k8stesting.WatchActionImpl)
				if !ok || w.WatchRestrictions.ResourceVersion == "" || refused.Load() > 0 {
					return false, nil, nil
				}
				refused.Add(1)
				gone := apierrors.NewResourceExpired("too old resource version")
				if how == "error" {
					return true, nil, gone
				}
				fw := watch.NewFake()
				go fw.Error(&gone.ErrStatus)
				return true, fw, nil
			})
			f.controller(t, ctx)
			p := NewForClients(Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 30 * time.Second}, nil, f.kube, f.ext, f.core, f.disc, nil)
			start := time.Now()
			if _, err := p.Claim(ctx, sandbox.Spec{Name: "s", StateDir: t.TempDir()}); err != nil {
				t.Fatalf("a claim whose watch from its version was refused: %v", err)
			}
			if refused.Load() == 0 {
				t.Fatal("no watch was refused: the test does not test an expired version")
			}
			if n := claimLists(f); n == 0 {
				t.Error("no list after the expired version: the informer did not take over")
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the claim took %s", d)
			}
		})
	}
}
