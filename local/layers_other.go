//go:build !linux

package local

import "context"

// Layers reports that the local backend has no layers on this system.
func (p *Provider) Layers(context.Context) ([]Layer, error) { return nil, ErrUnsupported }
