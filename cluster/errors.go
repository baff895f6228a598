package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrCRDsMissing means the cluster does not serve agent-sandbox's API groups.
var ErrCRDsMissing = errors.New("the agent-sandbox CRDs are not installed on this cluster (install agent-sandbox with its extensions: SandboxClaim, SandboxWarmPool, SandboxTemplate, Sandbox)")

// ErrUnauthorized means the API server rejected the credentials.
var ErrUnauthorized = errors.New("the API server rejected the kubeconfig's credentials (expired token or certificate?)")

// ForbiddenError means RBAC denied one verb on one resource.
type ForbiddenError struct {
	Verb, Resource, Namespace string
	Message                   string // the API server's own text
}

func (e *ForbiddenError) Error() string {
	ns := ""
	if e.Namespace != "" {
		ns = fmt.Sprintf(" in namespace %q", e.Namespace)
	}
	return fmt.Sprintf("RBAC forbids %s on %s%s: grant it in the Role bound to sbx's service account (cluster/deploy/rbac.yaml): %s",
		e.Verb, e.Resource, ns, e.Message)
}

// PoolNotFoundError means the configured SandboxWarmPool does not exist.
type PoolNotFoundError struct {
	Pool, Namespace string
}

func (e *PoolNotFoundError) Error() string {
	if e.Pool == "" {
		return fmt.Sprintf("no warm pool configured: set %s to a SandboxWarmPool in namespace %q (sbx pool render writes one)", EnvPool, e.Namespace)
	}
	return fmt.Sprintf("SandboxWarmPool %q not found in namespace %q (check %s and %s; sbx pool render writes one)",
		e.Pool, e.Namespace, EnvPool, EnvNamespace)
}

// UnreachableError means the API server could not be reached at all.
type UnreachableError struct {
	Server string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the API server %s is unreachable: %v (is the cluster up, and does the kubeconfig name the right server?)", e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ClaimTimeoutError means a claim did not become Ready in time. The claim
// has been deleted.
type ClaimTimeoutError struct {
	Claim, Pool, Namespace string
	Waited                 string
	Conditions             string // the claim's last conditions, "type=status (reason: message)"
	PoolReady, PoolWanted  int64
}

func (e *ClaimTimeoutError) Error() string {
	cond := e.Conditions
	if cond == "" {
		cond = "none reported"
	}
	return fmt.Sprintf("claim %s from pool %q in namespace %q was not Ready after %s (conditions: %s; pool has %d of %d sandboxes ready): deleted it; raise %s or the pool's replicas",
		e.Claim, e.Pool, e.Namespace, e.Waited, cond, e.PoolReady, e.PoolWanted, EnvClaimTimeout)
}

// apiError turns an error from the API server into one of this package's
// typed errors when it is one a user can act on; verb and resource say
// what was being done. Other errors come back wrapped with that context.
func apiError(err error, server, verb, resource, namespace string) error {
	if err == nil {
		return nil
	}
	var se apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		msg := err.Error()
		if errors.As(err, &se) {
			msg = se.Status().Message
		}
		return &ForbiddenError{Verb: verb, Resource: resource, Namespace: namespace, Message: msg}
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s %s: %w", verb, resource, ErrUnauthorized)
	case isUnreachable(err):
		return &UnreachableError{Server: server, Err: err}
	case apierrors.IsNotFound(err) && errors.As(err, &se) && se.Status().Details != nil && se.Status().Details.Name == "" &&
		strings.Contains(resource, "agents.x-k8s.io"):
		// 404 on a collection: the resource type itself is missing.
		return fmt.Errorf("%s %s: %w", verb, resource, ErrCRDsMissing)
	}
	return fmt.Errorf("%s %s: %w", verb, resource, err)
}

func isUnreachable(err error) bool {
	var ne net.Error
	var ue *url.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &oe):
		return true
	case errors.As(err, &ue) && errors.As(err, &ne):
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
