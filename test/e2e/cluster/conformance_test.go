//go:build e2e

package clustere2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

// TestConformance runs the sandbox contract's suite against the cluster
// backend, on sandboxes claimed from the e2e pool with the least-privilege
// service account. Limits are the pool template's, not Spec.Limits, so the
// limits promises are not run here.
//
// The shell wrapper (for pods no helper can run in; Sandbox.UseWrapper) is
// held to the same suite by TestConformanceWrapper
// (wrapper_conformance_test.go).
func TestConformance(t *testing.T) {
	conformance(t, false)
}

func conformance(t *testing.T, wrapper bool) {
	p := cluster.New(saCfg(t), nil)
	n := 0
	sandboxtest.Run(t, sandboxtest.Backend{
		New: func(st *testing.T, _ sandbox.Limits) sandbox.Sandbox {
			n++ // a name of its own: a Claim with a kept name finds that claim again
			name := fmt.Sprintf("conformance-%d", n)
			if wrapper {
				name = fmt.Sprintf("conformance-wrapper-%d", n)
			}
			sb := claim(st, p, name, sandbox.Spec{Name: name, StateDir: st.TempDir()})
			if wrapper {
				sb.UseWrapper()
			}
			return sb
		},
		Lose: func(st *testing.T, sb sandbox.Sandbox) {
			pod := sb.(*cluster.Sandbox).Pod()
			old, err := admin.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				st.Fatalf("get pod %s: %v", pod, err)
			}
			zero := int64(0)
			if err := admin.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				st.Fatalf("delete pod %s: %v", pod, err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				// agent-sandbox v0.5.6 makes a new pod of the same name at
				// once: the deleted one is gone when its UID is.
				p, err := admin.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
				if apierrors.IsNotFound(err) || (err == nil && p.UID != old.UID) {
					return
				}
				if time.Now().After(deadline) {
					st.Fatalf("pod %s still there 60s after its deletion (last: %v)", pod, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		},
	})
}
