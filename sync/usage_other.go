//go:build !linux

package sync

import "os"

// walkAll is the full count of the whole tree: walk from the root.
func (u *Usage) walkAll(r *os.Root) bool { return u.walk(r, "") }
