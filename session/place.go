package session

import (
	"errors"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// hostWorkspaces is a sandbox whose workspaces are the host directories
// the session names in its Spec.Mounts (the local backend binds them in):
// a new one's first push can be written into them directly.
type hostWorkspaces interface {
	WorkspacesOnHost() bool
}

// placeFirstPush writes the first push of a sandbox just claimed straight
// into its workspaces (sync.Round.Place) instead of streaming it to the
// helper. Only here is it known that no code of the sandbox has run in
// them: claim made them empty, and no command has run since (placeable is
// set by claim and cleared by the first round trip, whatever happens to
// it). A dir that cannot be placed streams as before. Called with run held.
func (s *Session) placeFirstPush(sb sandbox.Sandbox, round *sbxsync.Round) {
	if !s.placeable {
		return
	}
	s.placeable = false
	if hw, ok := sb.(hostWorkspaces); !ok || !hw.WorkspacesOnHost() {
		return
	}
	for i := range s.params.CodeDirs {
		start := time.Now()
		err := round.Place(i, s.workDir(i))
		switch {
		case err == nil:
			s.m.log.Debug("first push placed", "session", s.name, "dir", s.params.CodeDirs[i], "took", time.Since(start))
		case errors.Is(err, sbxsync.ErrNotPlaceable):
			s.m.log.Debug("first push streamed", "session", s.name, "why", err)
		default:
			s.m.log.Warn("first push streamed instead of placed", "session", s.name, "err", err)
		}
	}
}
