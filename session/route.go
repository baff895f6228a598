package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/sbx-sh/sbx/hostrun"
	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/internal/fastjson"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// auditEntry is one line of the session's audit log (audit.jsonl in its state
// directory): every routing decision made while serving.
type auditEntry struct {
	Time       time.Time `json:"time"`
	Session    string    `json:"session"`
	Command    string    `json:"command"`
	Cwd        string    `json:"cwd"`
	Where      string    `json:"where"`
	Reason     string    `json:"reason"`
	ExitCode   int       `json:"exit_code"`
	DurationMS int64     `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
}

// auditLine is e's line of the audit log, without its newline: the bytes
// encoding/json writes (invalid UTF-8 replaced, <, > and & escaped), in a
// fifth of its time (TestAuditLineAsEncodingJSON).
func auditLine(e auditEntry) ([]byte, error) { return fastjson.Marshal(e) }

func (s *Session) audit(e auditEntry) {
	e.Session = s.name
	raw, err := auditLine(e)
	if err != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "audit.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.m.log.Warn("audit log", "err", err)
		return
	}
	f.Write(append(raw, '\n'))
	f.Close()
}

// route decides where a shell command runs.
func (s *Session) route(command, cwd string) router.Decision {
	return router.Decide(command, cwd, s.params.CodeDirs, s.params.HostCommands)
}

// runOnHost runs a routed host command: first the sandbox's changes come
// back (so `git push` sees the commits made there), then the plan runs on
// the host with no shell, then the host's changes go into the sandbox (so
// `git pull` results are seen there).
func (s *Session) runOnHost(ctx context.Context, sb sandbox.Sandbox, d router.Decision, r Run) (sandbox.Result, sbxsync.Report, error) {
	rep, err := s.syncOnly(ctx, sb)
	if err != nil {
		return sandbox.Result{}, rep, fmt.Errorf("bring the sandbox's changes back before the host command: %w", err)
	}
	hctx := ctx
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	start := time.Now()
	code, herr := hostrun.Run(hctx, d.Plan, s.params.CodeDirs, r.Stdout, r.Stderr)
	res := sandbox.Result{ExitCode: code, Duration: time.Since(start)}
	if hctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		res.TimedOut, res.ExitCode, herr = true, sandbox.TimeoutExitCode, nil
	}
	rep2, err := s.syncOnly(ctx, sb)
	// A host git command can write files that host tools run or trust
	// (a pulled .claude/settings.json, say): they did not come through the
	// quarantine, so say so loudly.
	for _, p := range rep2.ProtectedPushed {
		s.mu.Lock()
		s.note(fmt.Sprintf("the host command changed %s, a file host tools trust (agent or editor settings, hooks); it did not pass through sbx's quarantine: review it", escape.Name(p)))
		s.mu.Unlock()
	}
	rep.Pushed += rep2.Pushed
	rep.Applied += rep2.Applied
	rep.Refused = append(rep.Refused, rep2.Refused...)
	rep.Conflicts = append(rep.Conflicts, rep2.Conflicts...)
	rep.Quarantined = append(rep.Quarantined, rep2.Quarantined...)
	if herr != nil {
		return res, rep, fmt.Errorf("host command refused: %w", herr)
	}
	if err != nil {
		return res, rep, fmt.Errorf("send the host's changes into the sandbox: %w", err)
	}
	return res, rep, nil
}

// stubFiles are the host-command stubs, for the first round trip of a new
// sandbox to write (sync.HelperFile): no command of their own.
func (s *Session) stubFiles() []sbxsync.HelperFile {
	stubs := router.StubScripts(s.params.HostCommands)
	names := make([]string, 0, len(stubs))
	for n := range stubs {
		names = append(names, n)
	}
	sort.Strings(names)
	var files []sbxsync.HelperFile
	for _, name := range names {
		files = append(files, sbxsync.HelperFile{Path: sandbox.StubDir + "/" + name, Content: []byte(stubs[name]), Exec: true, Required: true})
	}
	return files
}
