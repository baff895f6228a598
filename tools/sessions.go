package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Config is what the tools need from their process.
type Config struct {
	// Manager opens sbx sessions.
	Manager *session.Manager
	// Params sets up every session's sandbox (code dirs, network, limits).
	// IdleTTL is also how long a session may sit unused before the tools
	// release its sandbox (zero: never); the sandbox itself is told a little
	// more, as a backstop should this process die.
	Params session.Params
	// StartDir is where the first bash command of a sandbox runs (the
	// directory the agent was started in); empty means the first code dir.
	StartDir string
	// Key names the sbx session of a tool call. Nil means one session for
	// the whole process, named DefaultName.
	Key KeyFunc
	// DefaultName names the single session when Key is nil.
	DefaultName string
	// Err, when set, is a setup problem (no usable code dir, bad config):
	// every tool call fails with it, so the agent and its user see why, while
	// the server still starts and answers.
	Err error
	// Log receives one line per tool call and per session event.
	Log *slog.Logger
	// SDKLog receives the MCP SDK's own logs (nil: none).
	SDKLog *slog.Logger
}

// KeyFunc names the sbx session a tool call belongs to. Names must satisfy
// session.CheckName; different clients must get different names.
type KeyFunc func(req *mcp.CallToolRequest) (string, error)

// SessionHeader names the request header that keys a client's session when
// the protocol gives it no session id.
const SessionHeader = "Sbx-Session"

// HTTPKey keys HTTP clients by their MCP session id (else by their
// Sbx-Session header), scoped to the bearer token they authenticated with, so
// that two clients never share a sandbox and one token cannot reach another's.
func HTTPKey(req *mcp.CallToolRequest) (string, error) {
	scope := ""
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		scope = req.Extra.TokenInfo.UserID
	}
	var id string
	if req.Session != nil {
		id = req.Session.ID()
	}
	if id != "" {
		return hashName(scope, "mcp-session", id), nil
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if h := req.Extra.Header.Get(SessionHeader); h != "" {
			return hashName(scope, "header", h), nil
		}
	}
	return "", errors.New("this request has neither an Mcp-Session-Id nor an " + SessionHeader + " header, so sbx cannot tell which sandbox is yours: use a client that keeps an MCP session, or send " + SessionHeader + ": <any id of yours>")
}

func hashName(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// TokenScope is the non-secret name of a bearer token: the same token always
// gives the same scope, and the scope does not reveal the token.
func TokenScope(token string) string {
	sum := sha256.Sum256([]byte("sbx-token\x00" + token))
	return hex.EncodeToString(sum[:8])
}

// Sessions gives each client its own sbx session, opened on its first tool
// call, released when the client goes away, on the release tool, when idle
// for IdleTTL, and on Close.
type Sessions struct {
	// Set by NewSessions, then only read (stop is closed by Close, under mu).
	cfg  Config
	log  *slog.Logger
	stop chan struct{}

	// mu guards entries and closed. It is taken before an entry's mu, never
	// after it.
	mu      sync.Mutex
	entries map[string]*entry // mu
	closed  bool              // mu
	// dropping counts releases of entries already taken out of entries,
	// for Close to wait on. Its own synchronization; Add is called with mu
	// held, so that Close, which set closed, waits for every drop.
	dropping sync.WaitGroup
	// ports is the port tool's forwards (port.go); its own lock.
	ports portTable

	// Test hooks: reapPicked runs after the reaper detached an idle entry's
	// session and before it releases it; holdWaits runs when a call starts
	// waiting for such a release. Set before the first call; no lock.
	reapPicked func(*entry)
	holdWaits  func(*entry)
}

// NewSessions starts the idle reaper; Close stops it and releases everything.
func NewSessions(cfg Config) *Sessions {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Sessions{cfg: cfg, log: cfg.Log, stop: make(chan struct{}), entries: map[string]*entry{}}
	if ttl := cfg.Params.IdleTTL; ttl > 0 {
		go p.reap(ttl)
	}
	return p
}

// entry is one client's session and its background jobs.
type entry struct {
	p    *Sessions // set at creation; no lock
	name string    // set at creation; no lock

	// progress is where the sandbox's own progress lines go: the call that
	// is claiming it, if that call asked for progress. Atomic: the session
	// calls it from the claim, without e.mu.
	progress atomic.Pointer[progress]

	// mu guards every field below but files. It is held briefly, never
	// across a command or a release (hold's Manager.Open is the exception:
	// calls for the entry wait while its session opens). It is taken after
	// Sessions.mu and before the session's own mu (sess.Info() under it), so
	// it waits while that session claims a sandbox (session.Session's mu).
	mu       sync.Mutex
	sess     *session.Session // mu; nil until first use, and after a release
	jobs     map[string]*job  // mu
	nextJob  int              // mu
	active   int              // mu: calls in flight
	lastUsed time.Time        // mu
	notes    []string         // mu: for the next result
	// files is what the file tools know of the session (files.go); guarded
	// by its own lock, files.mu, not by e.mu.
	files    fileState
	watching bool // mu: a goroutine waits for the client to go away
	gone     bool // mu: dropped from the pool: a call must not reopen it
	// releasing is closed when the session detached from the entry has
	// been released: a call that arrives meanwhile waits for it (the new
	// session has the same name, so it must not open while the old one's
	// state is being removed). mu.
	releasing chan struct{}
}

// ErrClosed means the server is shutting down.
var ErrClosed = errors.New("sbx-mcp is shutting down")

// call is one tool call's hold on its session.
type call struct {
	e     *entry
	sess  *session.Session
	notes []string
	prog  *progress
}

// acquire finds or opens the caller's session and marks it in use until
// done is called.
func (p *Sessions) acquire(ctx context.Context, req *mcp.CallToolRequest) (*call, error) {
	if p.cfg.Err != nil {
		return nil, p.cfg.Err
	}
	name := p.cfg.DefaultName
	if p.cfg.Key != nil {
		var err error
		if name, err = p.cfg.Key(req); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	e := p.entries[name]
	if e == nil {
		e = &entry{p: p, name: name, jobs: map[string]*job{}}
		p.entries[name] = e
	}
	p.mu.Unlock()

	c, claiming, err := e.hold(ctx, req)
	if err == nil && claiming {
		// Sent without the lock: a slow client must not hold up other calls.
		c.prog.send("claiming a sandbox for session " + name)
	}
	return c, err
}

// hold opens the entry's session if needed and marks it in use; claiming
// says that this call's command will claim the sandbox.
func (e *entry) hold(ctx context.Context, req *mcp.CallToolRequest) (c *call, claiming bool, err error) {
	p := e.p
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.releasing != nil {
		// The session was detached (idle, release tool) and is being
		// released: wait for that, then open a fresh one.
		ch := e.releasing
		e.mu.Unlock()
		if p.holdWaits != nil {
			p.holdWaits(e)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			e.mu.Lock()
			return nil, false, ctx.Err()
		}
		e.mu.Lock()
	}
	if e.gone {
		return nil, false, errors.New("this MCP session has ended")
	}
	// A stateless request's MCP session ends with the request: the sbx
	// session outlives it (until idle), so only real sessions are watched.
	if !e.watching && req != nil && req.Session != nil && (req.Session.ID() != "" || p.cfg.Key == nil) {
		e.watching = true
		go func(ss *mcp.ServerSession) {
			ss.Wait()
			p.drop(e, "the client disconnected")
		}(req.Session)
	}
	prog := newProgress(ctx, req)
	if e.sess == nil {
		params := p.cfg.Params
		if params.IdleTTL > 0 {
			// The sandbox's own idle release is a backstop for a crashed
			// sbx-mcp; the reaper here releases it first.
			params.IdleTTL += 5 * time.Minute
		}
		params.Progress = func(msg string) {
			if pr := e.progress.Load(); pr != nil {
				pr.send(msg)
			}
		}
		s, err := p.cfg.Manager.Open(ctx, e.name, params)
		if err != nil {
			return nil, false, fmt.Errorf("open sbx session %s: %w", e.name, err)
		}
		e.notes = append(e.notes, s.Notices()...)
		e.sess = s
		p.log.Info("session opened", "session", e.name)
	}
	c = &call{e: e, sess: e.sess, notes: e.notes, prog: prog}
	e.notes = nil
	claiming = !e.sess.Info().Claimed
	if claiming {
		e.progress.Store(prog)
	}
	e.active++
	e.lastUsed = time.Now()
	return c, claiming, nil
}

// done ends the call's hold on its session.
func (c *call) done() {
	e := c.e
	e.progress.CompareAndSwap(c.prog, nil)
	e.mu.Lock()
	e.active--
	e.lastUsed = time.Now()
	e.mu.Unlock()
}

// firstDir is where a bash command starts until the session has recorded a
// working directory of its own: the directory the agent started in.
func (c *call) firstDir() string {
	if c.sess.Info().Cwd != "" {
		return ""
	}
	return c.e.p.cfg.StartDir
}

// cwd is where the next command of the session starts.
func (c *call) cwd() string {
	if d := c.sess.Info().Cwd; d != "" {
		return d
	}
	return c.startDir()
}

// startDir is where a fresh session's commands start.
func (c *call) startDir() string {
	if d := c.e.p.cfg.StartDir; d != "" {
		return d
	}
	if dirs := c.e.p.cfg.Params.CodeDirs; len(dirs) > 0 {
		return dirs[0]
	}
	return "/"
}

// failed looks at an engine error: a lost sandbox is dropped so that the
// next call claims a new one, and the error says so.
func (c *call) failed(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrLost):
		c.e.reset(c.sess, "")
		return fmt.Errorf("%w; the next call claims a new sandbox (the working directory is reset, files outside the code dirs are gone)", err)
	case errors.Is(err, session.ErrClosed):
		return errors.New("the sandbox was released while this call ran (release tool, idle timeout or shutdown); call again to claim a new one")
	}
	return err
}

// reset forgets a session whose sandbox is gone and releases what is left.
func (e *entry) reset(s *session.Session, note string) {
	e.mu.Lock()
	if e.sess != s {
		e.mu.Unlock()
		return
	}
	e.detachLocked()
	if note != "" {
		e.notes = append(e.notes, note)
	}
	jobs := e.takeJobs()
	e.mu.Unlock()
	stopJobs(jobs)
	defer e.released()
	if err := s.Release(context.Background()); err != nil {
		e.p.log.Warn("release lost session", "session", e.name, "err", err)
	}
}

func (e *entry) takeJobs() []*job {
	var jobs []*job
	for _, j := range e.jobs {
		jobs = append(jobs, j)
	}
	e.jobs = map[string]*job{}
	return jobs
}

// detach takes the entry's session away and stops its background jobs
// (their changes come back as they end). The next call waits until
// released is called, then opens a new session.
func (e *entry) detach() *session.Session {
	e.mu.Lock()
	s := e.detachLocked()
	jobs := e.takeJobs()
	e.mu.Unlock()
	stopJobs(jobs)
	return s
}

// detachLocked takes the session away, with e.mu held; a call arriving
// from now on waits for released.
func (e *entry) detachLocked() *session.Session {
	s := e.sess
	e.sess = nil
	if s != nil && e.releasing == nil {
		e.releasing = make(chan struct{})
	}
	return s
}

// released lets the calls waiting on a detached session's release go on.
func (e *entry) released() {
	e.mu.Lock()
	if e.releasing != nil {
		close(e.releasing)
		e.releasing = nil
	}
	e.mu.Unlock()
}

// release detaches the session and releases its sandbox.
func (e *entry) release(ctx context.Context, why string) error {
	s := e.detach()
	if s == nil {
		return nil
	}
	defer e.released()
	return e.releaseDetached(ctx, s, why)
}

func (e *entry) releaseDetached(ctx context.Context, s *session.Session, why string) error {
	err := s.Release(ctx)
	for _, n := range s.Notices() {
		e.p.log.Warn("session release", "session", e.name, "note", n)
	}
	e.p.log.Info("session released", "session", e.name, "why", why, "err", err)
	return err
}

// close detaches the session and closes it as the server shuts down:
// Session.Close keeps a kept one (persistent cluster claims; the next
// server with the same session name reattaches) and releases the others.
func (e *entry) close(ctx context.Context) error {
	s := e.detach()
	if s == nil {
		return nil
	}
	defer e.released()
	err := s.Close(ctx)
	e.p.log.Info("session closed", "session", e.name, "kept", s.Info().Keep, "err", err)
	return err
}

// drop releases the entry for good (its client is gone).
func (p *Sessions) drop(e *entry, why string) {
	p.mu.Lock()
	if p.entries[e.name] != e {
		p.mu.Unlock()
		return // Close has it
	}
	delete(p.entries, e.name)
	p.dropping.Add(1)
	defer p.dropping.Done()
	p.mu.Unlock()
	e.mu.Lock()
	e.gone = true
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A kept session (persistent cluster claims) outlives its client as it
	// outlives the server: the next server with its name reattaches. The
	// client's disconnect and the server's shutdown race at the end of
	// input, and both must keep it.
	if e.kept() {
		e.close(ctx)
		return
	}
	e.release(ctx, why)
}

// kept reports whether the entry's session was opened to outlive its server.
func (e *entry) kept() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sess != nil && e.sess.Info().Keep
}

// Close releases every session (background jobs are stopped first, so what
// they changed comes back), but keeps those opened with Params.Keep, and
// refuses further calls.
func (p *Sessions) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	var entries []*entry
	for _, e := range p.entries {
		entries = append(entries, e)
	}
	p.entries = map[string]*entry{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(entries))
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.mu.Lock()
			e.gone = true
			e.mu.Unlock()
			errs[i] = e.close(ctx)
		}()
	}
	wg.Wait()
	p.dropping.Wait()
	return errors.Join(errs...)
}

// reap releases sandboxes that have run nothing for ttl. The entry stays:
// the client's next call claims a new sandbox and is told why.
func (p *Sessions) reap(ttl time.Duration) {
	tick := min(max(ttl/10, time.Second), time.Minute)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.reapOnce(now, ttl)
		}
	}
}

// reapOnce releases the sessions idle for more than ttl at now. The check
// and the detach are one step under the entry's lock: a call that holds the
// session (active) keeps it, and a call that comes after the detach waits
// for the release and then gets a fresh session.
func (p *Sessions) reapOnce(now time.Time, ttl time.Duration) {
	type idle struct {
		e *entry
		s *session.Session
	}
	var found []idle
	p.mu.Lock()
	for _, e := range p.entries {
		e.mu.Lock()
		if e.sess != nil && e.active == 0 && !e.jobsRunning() && now.Sub(e.lastUsed) > ttl {
			e.notes = append(e.notes, fmt.Sprintf("the previous sandbox was released after %s without use; this call claimed a new one (the working directory is back at the start, files outside the code dirs are gone)", ttl))
			found = append(found, idle{e, e.detachLocked()})
			e.jobs = map[string]*job{} // all ended (jobsRunning)
		}
		e.mu.Unlock()
	}
	p.mu.Unlock()
	for _, x := range found {
		if p.reapPicked != nil {
			p.reapPicked(x.e)
		}
		x.e.releaseDetached(context.Background(), x.s, "idle")
		x.e.released()
	}
}

func (e *entry) jobsRunning() bool {
	for _, j := range e.jobs {
		select {
		case <-j.done:
		default:
			return true
		}
	}
	return false
}

// releaseTool is the release tool's work on the caller's session.
func (p *Sessions) releaseSession(ctx context.Context, req *mcp.CallToolRequest) (bool, error) {
	if p.cfg.Err != nil {
		return false, p.cfg.Err
	}
	name := p.cfg.DefaultName
	if p.cfg.Key != nil {
		var err error
		if name, err = p.cfg.Key(req); err != nil {
			return false, err
		}
	}
	p.mu.Lock()
	e := p.entries[name]
	p.mu.Unlock()
	if e == nil {
		return false, nil
	}
	e.mu.Lock()
	had := e.sess != nil && e.sess.Info().Claimed
	e.mu.Unlock()
	return had, e.release(ctx, "release tool")
}

// progress sends progress notifications for one call that asked for them
// (sent a progress token). A nil *progress sends nothing.
type progress struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
	mu    sync.Mutex // guards n: the claim's progress and a call's ticker send at once
	n     float64
}

func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	return &progress{ctx: ctx, ss: req.Session, token: tok}
}

func (pr *progress) send(msg string) {
	if pr == nil {
		return
	}
	pr.mu.Lock()
	pr.n++
	n := pr.n
	pr.mu.Unlock()
	// A slow or gone client must not hold up the command.
	ctx, cancel := context.WithTimeout(pr.ctx, 2*time.Second)
	defer cancel()
	pr.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: pr.token, Progress: n, Message: msg})
}

// ticker sends "msg (Ns)" every interval until the returned stop is called.
func (pr *progress) ticker(interval time.Duration, msg string) (stop func()) {
	if pr == nil {
		return func() {}
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-pr.ctx.Done():
				return
			case <-t.C:
				pr.send(fmt.Sprintf("%s (%ds)", msg, int(time.Since(start).Seconds())))
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// notesText renders notes for the end of a result.
func notesText(notes []string) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("\nNote: ")
		b.WriteString(n)
	}
	return b.String()
}

// lossText says what the pull-back kept from being lost: host changes that
// stay against a sandbox removal, deletions held for the user's decision
// (and the exact command the user runs: the agent cannot accept for them).
func lossText(rep sbxsync.Report, name string) string {
	var b strings.Builder
	for _, k := range rep.HostKept {
		b.WriteString("\nConflict: ")
		b.WriteString(escape.Line(k))
	}
	switch {
	case len(rep.Held) > 0:
		shown := rep.Held
		if len(shown) > 20 {
			shown = shown[:20]
		}
		names := make([]string, len(shown))
		for i, p := range shown {
			names[i] = escape.Name(p)
		}
		more := ""
		if len(rep.Held) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(rep.Held)-len(shown))
		}
		fmt.Fprintf(&b, "\nHeld: this command's deletions were not applied to the host, because %s: %s%s. The host keeps these files and the sandbox no longer has them; later commands run as usual. The user decides (not the agent): `sbx accept --deletions --session %s` deletes them on the host, `sbx accept --reject-deletions --session %s` puts them back into the sandbox.",
			escape.Line(rep.HeldReason), strings.Join(names, ", "), more, name, name)
	case rep.HeldWaiting > 0:
		fmt.Fprintf(&b, "\nHeld: %d deletions of an earlier command still wait for the user: `sbx accept --deletions --session %s` (or --reject-deletions).", rep.HeldWaiting, name)
	}
	return b.String()
}
