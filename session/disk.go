package session

import (
	"errors"
	"fmt"

	sbxsync "github.com/sbx-sh/sbx/sync"
)

// The disk limit (Limits.DiskBytes, config key disk) bounds what the sandbox
// costs the host's disk: what one command brings back (the pull's total,
// checked by the sync as it reads, before anything is spooled past it or
// applied) and the workspace, the sandbox's copy of the code dirs on the
// host (summed after each command; the local backend also bounds each file
// with RLIMIT_FSIZE while the command runs). Over either, nothing comes
// back and the sandbox keeps its files: the user removes some there, or
// raises the limit.

// keptText says what became of the sandbox's changes over the limit.
const keptText = "nothing of this command was brought back, and the sandbox keeps its files while the session lasts: remove what is not needed there (with --keep, in a later command) or raise the limit"

// diskHint says how to change the disk limit.
func diskHint(limit int64) string {
	more := sizeText(2 * limit)
	return fmt.Sprintf("raise it with disk = \"%s\" in ~/.config/sbx/config.toml, SBX_DISK=%s or --disk %s; 0 for none", more, more, more)
}

// diskError rewrites a pull refused for its size as the error the user acts
// on; other errors pass unchanged.
func (s *Session) diskError(err error) error {
	var se *sbxsync.SizeError
	if err == nil || !errors.As(err, &se) || s.params.Limits.DiskBytes <= 0 {
		return err
	}
	what := fmt.Sprintf("they are at least %s (%d bytes)", humanBytes(se.AtLeast), se.AtLeast)
	if se.File {
		what = fmt.Sprintf("they hold a file of %s (%d bytes)", humanBytes(se.AtLeast), se.AtLeast)
	}
	return fmt.Errorf("%s, over the disk limit of %s (%s); %s", what, humanBytes(se.Limit), diskHint(se.Limit), keptText)
}

// checkWorkspace sums the disk the sandbox's workspaces take on the host and
// refuses when that is over the disk limit.
func (s *Session) checkWorkspace() error {
	limit := s.params.Limits.DiskBytes
	if limit <= 0 {
		return nil
	}
	var total int64
	for i := range s.params.CodeDirs {
		n, err := s.workspaceUsage(i, limit-total)
		total += n
		if err != nil {
			return fmt.Errorf("measure the sandbox's workspace against the disk limit: %w; nothing of this command was brought back", err)
		}
		if total > limit {
			return fmt.Errorf("the sandbox's files take more than %s (%d bytes) of the host's disk, over the disk limit of %s (%s); %s", humanBytes(total), total, humanBytes(limit), diskHint(limit), keptText)
		}
	}
	return nil
}

// humanBytes writes n in the largest binary unit that keeps it readable.
func humanBytes(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, u := float64(n), 0
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for v /= unit; v >= unit && u < len(units)-1; v /= unit {
		u++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%s", int64(v), units[u])
	}
	return fmt.Sprintf("%.1f%s", v, units[u])
}

// sizeText writes n exactly, in the largest binary unit that divides it, as
// the disk setting takes it.
func sizeText(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d", n)
}

// workspaceUsage is diskUsage of workspace i, kept current from file-system
// events in a watching session (Params.Watch: sbx-mcp), so that the check
// after each command costs what the command changed. Called with s.run held.
func (s *Session) workspaceUsage(i int, stop int64) (int64, error) {
	if s.usage != nil && i < len(s.usage) && s.usage[i].Watching() {
		n, err := s.usage[i].Total()
		if !sbxsync.UsageOff(err) {
			return n, err
		}
	}
	return diskUsage(s.workDir(i), stop)
}
