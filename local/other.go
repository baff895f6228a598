//go:build !linux

package local

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// Provider is the local backend; on this system it only reports that it
// needs Linux.
type Provider struct {
	Version      string
	ClaimTimeout time.Duration
	Egress       *Egress
	Caches       func(stateDir string, uid, gid int) ([]sandbox.Mount, []string, error)
	Log          *slog.Logger
}

// ErrUnsupported is returned on systems other than Linux.
var ErrUnsupported = errors.New("the local sandbox backend needs Linux namespaces; use backend = \"cluster\" on this system")

func (p *Provider) Name() string { return "local" }

func (p *Provider) Claim(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, ErrUnsupported
}

func (p *Provider) Attach(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, sandbox.ErrNotFound
}

// Main does nothing on systems other than Linux.
func Main() {}

// MemoryWorkRoot: workspaces in memory need the local backend, and so Linux.
func (p *Provider) MemoryWorkRoot(sandbox.Limits, int64) (string, error) {
	return "", ErrUnsupported
}
