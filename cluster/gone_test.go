package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sbx-sh/sbx/sandbox"
)

func claimForTest(t *testing.T, ctx context.Context) (*fakeCluster, *Sandbox) {
	t.Helper()
	f := newFakeCluster(t, "v1alpha1", pool("p", "busybox", 2))
	f.controller(t, ctx)
	cfg := Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 10 * time.Second}
	p := NewForClients(cfg, nil, f.kube, f.ext, f.core, f.disc, nil)
	sb, err := p.Claim(ctx, sandbox.Spec{Name: "gone", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return f, sb.(*Sandbox)
}

// Past its shutdownTime a claim is not renewed (that would race the
// controller's deletion, and a command could run in a sandbox being
// deleted): the command does not run, the error says nothing ran, and the
// claim is deleted.
func TestExecAfterShutdownTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, s := claimForTest(t, ctx)
	c, err := f.claim(ctx, s.Claim())
	if err != nil {
		t.Fatal(err)
	}
	before := c.ShutdownTime
	s.mu.Lock()
	s.shutdown = time.Now().Add(-time.Second)
	s.mu.Unlock()
	_, err = s.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}})
	if !errors.Is(err, sandbox.ErrUnreachable) || !strings.Contains(err.Error(), "passed its shutdownTime") {
		t.Fatalf("exec past shutdownTime: %v; want ErrUnreachable saying the claim expired", err)
	}
	c, err = f.claim(ctx, s.Claim())
	if !apierrors.IsNotFound(err) {
		after := c.ShutdownTime
		t.Errorf("the expired claim is still there (err %v), shutdownTime %s, was %s", err, after, before)
	}
	if _, err := s.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrUnreachable) {
		t.Errorf("a second exec: %v; want ErrUnreachable", err)
	}
}

// The claim is watched from the first command on: one being deleted (a
// release by another process, the controller's expiry) makes the sandbox
// gone before its pod is, and no later command runs.
func TestClaimWatchSeesDeletion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, s := claimForTest(t, ctx)
	s.ensureWatch()
	defer s.closeMux()
	c, err := f.ext.ExtensionsV1alpha1().SandboxClaims("sbx").Get(ctx, s.Claim(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	c.SetDeletionTimestamp(&now)
	c.SetFinalizers([]string{"foregroundDeletion"})
	if _, err := f.ext.ExtensionsV1alpha1().SandboxClaims("sbx").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.goneReason() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the claim's deletion was not seen in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if why := s.goneReason(); !strings.Contains(why, "claim "+s.Claim()+" is being deleted") {
		t.Errorf("gone because %q", why)
	}
	if _, err := s.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrUnreachable) {
		t.Errorf("exec after the claim's deletion: %v; want ErrUnreachable", err)
	}
}

// A pod deleted is seen by the same watch.
func TestPodWatchSeesDeletion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, s := claimForTest(t, ctx)
	s.ensureWatch()
	defer s.closeMux()
	if err := f.kube.CoreV1().Pods("sbx").Delete(ctx, s.Pod(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.goneReason() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the pod's deletion was not seen in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if why := s.goneReason(); why != "pod "+s.Pod()+" was deleted" {
		t.Errorf("gone because %q", why)
	}
}

// Spec.Limits.MemoryBytes holds on the cluster: a pod whose memory limit
// is looser than the sandbox's (or absent) is refused and its claim
// deleted; one within it is used.
func TestClaimHoldsMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		pod    string // the pods' limits.memory, "" for none
		ok     bool
		reason string
	}{
		{"no pod limit", "", false, "has no memory limit, looser than the sandbox's memory limit of 1Gi"},
		{"looser pod limit", "2Gi", false, "has a memory limit of 2Gi, looser than the sandbox's memory limit of 1Gi"},
		{"equal", "1Gi", true, ""},
		{"tighter", "512Mi", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFakeCluster(t, "v1alpha1", pool("p", "busybox", 2))
			if c.pod != "" {
				f.podLimits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(c.pod)}
			}
			f.controller(t, ctx)
			p := NewForClients(Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 10 * time.Second}, nil, f.kube, f.ext, f.core, f.disc, nil)
			sb, err := p.Claim(ctx, sandbox.Spec{Name: "limits", StateDir: t.TempDir(), Limits: sandbox.Limits{MemoryBytes: 1 << 30}})
			if c.ok {
				if err != nil {
					t.Fatalf("pod limit %s within 1Gi: %v", c.pod, err)
				}
				sb.Release(ctx)
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("pod limit %q: err %v; want a refusal saying %q", c.pod, err, c.reason)
			}
			if list := f.claims(ctx); len(list) != 0 {
				t.Errorf("the refused claim was not deleted: %d claims left", len(list))
			}
		})
	}
}

// A container that the kubelet started again (its init exited, an OOM
// kill) is a new sandbox in the same pod: the watch sees its restart count
// rise, and no later command runs in it as if it were the session's.
func TestPodWatchSeesContainerRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeCluster(t, "v1alpha1", pool("p", "busybox", 2))
	// The controller's pods report the container's status.
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sandbox", RestartCount: 2}}
		return false, nil, nil
	})
	f.controller(t, ctx)
	p := NewForClients(Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 10 * time.Second}, nil, f.kube, f.ext, f.core, f.disc, nil)
	sb, err := p.Claim(ctx, sandbox.Spec{Name: "restart", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	if !s.restartsKnown || s.restarts != 2 {
		t.Fatalf("restarts %d (known %v), want 2 from the pod's status", s.restarts, s.restartsKnown)
	}
	s.ensureWatch()
	defer s.closeMux()
	pod, err := f.kube.CoreV1().Pods("sbx").Get(ctx, s.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses[0].RestartCount = 3
	if _, err := f.kube.CoreV1().Pods("sbx").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.goneReason() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the container's restart was not seen in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if why := s.goneReason(); !strings.Contains(why, "container sandbox of pod "+s.Pod()+" restarted") {
		t.Errorf("gone because %q", why)
	}
	if _, err := s.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrUnreachable) {
		t.Errorf("exec after the restart: %v; want ErrUnreachable", err)
	}
}

// TestPodRecreatedIsGone: agent-sandbox v0.5.6 makes a deleted pod again at
// once, under the same name and for the same claim. The new pod has none of
// the sandbox's processes or files, so a command that ended as it was
// deleted is lost (not "exit 137"), and no later command runs in the new pod,
// in this process or in one that attaches from the state file.
func TestPodRecreatedIsGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeCluster(t, "v1alpha1", pool("p", "busybox", 2))
	n := 0
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.UID == "" {
			n++
			pod.UID = types.UID(fmt.Sprintf("pod-uid-%d", n))
		}
		return false, nil, nil
	})
	f.controller(t, ctx)
	cfg := Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 10 * time.Second}
	p := NewForClients(cfg, nil, f.kube, f.ext, f.core, f.disc, nil)
	dir := t.TempDir()
	sb, err := p.Claim(ctx, sandbox.Spec{Name: "recreated", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	if s.podUID == "" {
		t.Fatal("the sandbox did not keep its pod's UID")
	}
	pods := f.kube.CoreV1().Pods("sbx")
	pod, err := pods.Get(ctx, s.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := pod.DeepCopy()
	again.UID, again.ResourceVersion = "", ""
	if _, err := pods.Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What the exec path asks when a command's stream ended early.
	if err := s.lost(ctx, errors.New("command terminated with exit code 137"), true); !errors.Is(err, sandbox.ErrLost) || !strings.Contains(err.Error(), "made again") {
		t.Errorf("a command that ended as its pod was replaced: %v; want ErrLost naming the new pod", err)
	}
	// Another process attaching from the state file finds the claim stale.
	p2 := NewForClients(cfg, nil, f.kube, f.ext, f.core, f.disc, nil)
	_, err = p2.Attach(ctx, sandbox.Spec{Name: "recreated", StateDir: dir})
	var stale *sandbox.StaleError
	if !errors.As(err, &stale) || !strings.Contains(err.Error(), "made again") {
		t.Errorf("attach after the pod was made again: %v; want a StaleError naming it", err)
	}
}
