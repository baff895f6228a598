package local

import "github.com/sbx-sh/sbx/egress"

// Egress is the allow_net configuration of the sandboxes a Provider claims.
type Egress struct {
	Allow  []string
	Inject []egress.Injection
	// AuditMax bounds audit.jsonl for the proxy's decisions (0:
	// MaxEgressAudit).
	AuditMax int64
}
