package local

import "github.com/sbx-sh/sbx/egress"

// Egress is the allow_net configuration of the sandboxes a Provider claims.
type Egress struct {
	Allow  []string
	Inject []egress.Injection
}
