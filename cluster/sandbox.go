package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "k8s.io/api/core/v1"

	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/sandbox"
)

// Sandbox is one claimed sandbox: a SandboxClaim and the pod behind it.
type Sandbox struct {
	p                 *Provider
	a                 *api
	ns, claim, uid    string
	pod, container    string
	session, stateDir string
	ttl               time.Duration
	podMemory         int64  // the pod's memory limit in bytes, 0 when none (checkLimits)
	podUID            string // the pod's UID when sbx found it; another is a new pod (podGone)
	// restarts is the container's restart count when sbx found the pod
	// (restartsKnown): a higher one means a new container (podGone).
	restarts            int32
	restartsKnown       bool
	mu                  sync.Mutex
	shutdown, lastRenew time.Time
	released            bool

	muxMu     sync.Mutex
	mux       *inpod.MuxClient   // the long-lived exec of the helper (helper.go)
	noHelper  error              // why sbx has no helper to upload, once known
	stopWatch context.CancelFunc // ends watchSandbox (watch.go)
	gone      string             // why the pod or claim can no longer serve, once a watch or Renew saw it
	relay     string             // the relay's socket, when commands go through one (relay.go)
	fresh     bool               // claimed by this process: no helper started in its pod yet
	// preinstalled: the pod's AnnotHelper says its pool put the helper in
	// (an init container): a fresh pod starts it without an upload first.
	preinstalled bool
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// api returns the API client, connecting on first use (a sandbox reached
// through its relay starts without one).
func (s *Sandbox) api(ctx context.Context) (*api, error) {
	s.mu.Lock()
	a := s.a
	s.mu.Unlock()
	if a != nil {
		return a, nil
	}
	a, err := s.p.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.a = a
	s.mu.Unlock()
	return a, nil
}

// Claim returns the SandboxClaim's name.
func (s *Sandbox) Claim() string { return s.claim }

// Pod returns the pod's name.
func (s *Sandbox) Pod() string { return s.pod }

// Namespace returns the namespace of the claim and pod.
func (s *Sandbox) Namespace() string { return s.ns }

// ShutdownTime returns the claim's shutdownTime as sbx last set it.
func (s *Sandbox) ShutdownTime() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdown
}

func (s *Sandbox) state() state {
	return state{Namespace: s.ns, Claim: s.claim, UID: s.uid, Pod: s.pod, PodUID: s.podUID, Container: s.container, Session: s.session}
}

// renewMinInterval bounds how often Renew patches the claim.
const renewMinInterval = 5 * time.Second

// Renew pushes the claim's shutdownTime to now + TTL when less than half
// of the TTL is left (and at most once per renewMinInterval), so an active
// sandbox never expires and an abandoned one does. A claim that is gone
// gives an error wrapping sandbox.ErrLost.
func (s *Sandbox) Renew(ctx context.Context) error {
	s.mu.Lock()
	shutdown := s.shutdown
	expired := !shutdown.IsZero() && !time.Now().Before(shutdown)
	due := time.Until(shutdown) < s.ttl/2 && time.Since(s.lastRenew) >= renewMinInterval
	s.mu.Unlock()
	if expired {
		// Past its shutdownTime the claim is the controller's to delete,
		// and may be deleted at any moment, its pod still terminating and
		// reachable: renewing it now would race that deletion, and a
		// command could run, and report success, in a sandbox already
		// gone. It is not renewed: the sandbox is gone, nothing runs.
		why := fmt.Sprintf("claim %s passed its shutdownTime %s (unused for longer than its TTL of %s)",
			s.claim, shutdown.UTC().Format(time.RFC3339), s.ttl)
		s.setGone(why)
		if a, err := s.api(ctx); err == nil {
			s.p.deleteClaim(a, s.ns, s.claim)
		}
		return fmt.Errorf("%w: %v", sandbox.ErrUnreachable, lostError(why, errors.New("expired"), false))
	}
	if !due {
		return nil
	}
	return s.RenewNow(ctx)
}

// RenewNow sets the claim's shutdownTime to now + TTL unconditionally.
func (s *Sandbox) RenewNow(ctx context.Context) error {
	a, err := s.api(ctx)
	if err != nil {
		return err
	}
	t := time.Now().Add(s.ttl).UTC().Truncate(time.Second)
	patch := fmt.Sprintf(`{"spec":{"lifecycle":{"shutdownTime":%q}}}`, t.Format(time.RFC3339))
	obj, err := a.claimPatch(ctx, s.ns, s.claim, types.MergePatchType, []byte(patch))
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: claim %s no longer exists (expired or deleted)", sandbox.ErrLost, s.claim)
	}
	if err != nil {
		return apiError(err, a.server, "patch", "sandboxclaims."+GroupExtensions, s.ns)
	}
	if obj.GetDeletionTimestamp() != nil {
		// Being deleted (finalizers hold it): as good as gone.
		return fmt.Errorf("%w: claim %s is being deleted (expired or released)", sandbox.ErrLost, s.claim)
	}
	s.mu.Lock()
	s.shutdown, s.lastRenew = t, time.Now()
	s.mu.Unlock()
	return nil
}

// Release deletes the claim (foreground: the Sandbox and pod go with it) and
// forgets it. It is idempotent.
func (s *Sandbox) Release(ctx context.Context) error {
	s.mu.Lock()
	s.released = true
	s.mu.Unlock()
	s.closeMux()
	a, err := s.api(ctx)
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	err = a.claimDelete(ctx, s.ns, s.claim, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError(err, a.server, "delete", "sandboxclaims."+GroupExtensions, s.ns)
	}
	if s.stateDir != "" {
		if err := os.Remove(filepath.Join(s.stateDir, stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// lost decides, after an exec failed with cause, whether the sandbox is gone
// (claim or pod deleted, pod not running). If so it returns an error wrapping
// sandbox.ErrLost that says what happened; else nil.
func (s *Sandbox) lost(ctx context.Context, cause error, started bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	what := ""
	a, err := s.api(ctx)
	if err != nil {
		return nil
	}
	pod, err := a.kube.CoreV1().Pods(s.ns).Get(ctx, s.pod, getOpts)
	switch {
	case apierrors.IsNotFound(err):
		what = "pod " + s.pod + " was deleted"
	case err != nil:
		return nil
	case s.podGone(pod) != "":
		what = s.podGone(pod)
	default:
		if _, err := a.claimGet(ctx, s.ns, s.claim); apierrors.IsNotFound(err) {
			what = "claim " + s.claim + " is gone (expired or deleted)"
		} else {
			return nil
		}
	}
	return lostError(what, cause, started)
}

func lostError(what string, cause error, started bool) error {
	if started {
		return fmt.Errorf("%w: %s while a command ran (%v); what that command changed in the sandbox and had not been synced back is lost", sandbox.ErrLost, what, cause)
	}
	return fmt.Errorf("%w: %s (%v); the command did not run", sandbox.ErrLost, what, cause)
}

// podGone says why a pod can no longer serve this sandbox, or "".
func (s *Sandbox) podGone(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "pod " + s.pod + " is being deleted"
	case s.podUID != "" && string(pod.UID) != s.podUID:
		return "pod " + s.pod + " was deleted and made again (a new pod, without the sandbox's processes or files)"
	case pod.Status.Phase != corev1.PodRunning:
		return fmt.Sprintf("pod %s is %s", s.pod, pod.Status.Phase)
	case pod.Labels[labelClaimUID] != "" && pod.Labels[labelClaimUID] != s.uid:
		return "pod " + s.pod + " now belongs to another claim"
	}
	if s.restartsKnown {
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == s.container && cs.RestartCount > s.restarts {
				// The kubelet started the container again (its init exited,
				// an OOM kill): the helper, the commands and every file
				// outside the pod's volumes are gone, though the pod is not.
				return fmt.Sprintf("container %s of pod %s restarted (%d restarts, %d when claimed): its processes and files are gone", s.container, s.pod, cs.RestartCount, s.restarts)
			}
		}
	}
	return ""
}

// server is the API server's address for messages, "" before connecting.
func (s *Sandbox) server() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.a == nil {
		return ""
	}
	return s.a.server
}
