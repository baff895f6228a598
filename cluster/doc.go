// Package cluster is sbx's Kubernetes backend: it claims sandboxes from
// kubernetes-sigs/agent-sandbox warm pools and runs commands in their pods,
// talking to the API server with client-go only (never kubectl).
//
// Claim creates a SandboxClaim labelled with the session key and the user,
// with spec.lifecycle.shutdownTime = now + idle TTL and shutdownPolicy Delete,
// watches it until Ready and finds its pod. Exec runs a command in that pod
// through the pods/exec sub-resource (WebSocket, falling back to SPDY).
// Renew pushes shutdownTime forward while the sandbox is used; Release deletes
// the claim.
//
// Promises: every object sbx creates carries the labels of labels.go, so a
// restarted sbx can find (Attach, persistent mode) or remove (ReleaseAll) its
// claims; a claim that sbx stops renewing expires on the cluster by itself;
// a command's timeout or cancellation kills its whole process tree inside the
// pod (killTree), not just the stream; every API error that a user can act on
// (RBAC, missing CRDs, missing pool, unreachable server, bad kubeconfig) comes
// back as a typed error that names the cause.
//
// The operator kit (RBAC, RuntimeClass, node scripts) lives in cluster/deploy.
package cluster
