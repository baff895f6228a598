//go:build linux

package local

import (
	"context"
	"os"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// claimExtras are what a Provider's Egress and Caches add to a claim: more
// mounts (already in the spec), variables for every command, and the egress
// proxy to start once the init serves.
type claimExtras struct {
	plan *egressPlan
	env  []string
	bin  *os.File // the stages' binary (stageFor; nil: /proc/self/exe)
}

func (p *Provider) extras(ctx context.Context, spec *sandbox.Spec, ids hostIDs) (*claimExtras, error) {
	x := &claimExtras{}
	mounts := append([]sandbox.Mount(nil), spec.Mounts...)
	if p.Caches != nil {
		ms, env, err := p.Caches(spec.StateDir, ids.UID, ids.GID)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, ms...)
		x.env = append(x.env, env...)
	}
	if p.Egress != nil && len(p.Egress.Allow) > 0 && spec.Network != sandbox.NetworkHost {
		plan, err := planEgress(ctx, p.Egress, *spec)
		if err != nil {
			return nil, err
		}
		x.plan = plan
		mounts = append(mounts, plan.mounts...)
		x.env = append(x.env, plan.env...)
	}
	spec.Mounts = mounts
	return x, nil
}

func (x *claimExtras) egressPort() int {
	if x.plan == nil {
		return 0
	}
	return EgressPort
}

func (x *claimExtras) start(ctx context.Context, stateDir string, timeout time.Duration) error {
	if x.plan == nil {
		return nil
	}
	return startEgress(ctx, x.plan, x.bin, stateDir, timeout)
}
