// Package session is sbx's engine: it owns the life of a session's sandbox.
//
// A session has a name, a backend, code directories, a working directory that
// persists between commands, and a state directory. Its sandbox is claimed on
// first use. After every command what the command changed in the sandbox's
// copy of the code directories comes back to the host (see package sync).
// A kept session outlives the process that made it and is found again by
// name; an unkept one is released when closed. Commands of one session run
// one at a time (a lock in the state directory serializes them, across
// processes too); different sessions share nothing.
package session

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbx-sh/sbx/cache"
	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/internal/fastjson"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/sandbox"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Manager finds, creates and releases sessions under one state root.
type Manager struct {
	root string
	prov sandbox.Provider
	log  *slog.Logger
	// pruneOnce drops expired journals once per manager.
	pruneOnce sync.Once
	// Params are what Release and ReleaseAll use to pull back a session
	// found by name (excludes, journal size); code dirs come from the
	// session's own record. Set before the manager is used; no lock.
	Params Params
}

// NewManager returns a manager keeping session state under root.
func NewManager(root string, prov sandbox.Provider, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{root: root, prov: prov, log: log}
}

// Params is how a session's sandbox is set up.
type Params struct {
	CodeDirs []string // absolute, clean paths of existing directories
	Network  sandbox.Network
	Limits   sandbox.Limits
	IdleTTL  time.Duration
	Keep     bool
	Progress func(string)
	// Exclude adds sync exclude patterns (gitignore syntax) to the defaults
	// and each code dir's .sbxignore.
	Exclude []string
	// HostCommands are the command prefixes the router may run on the host
	// (router.ParsePrefixes); nil means every command runs in the sandbox.
	HostCommands [][]string
	// ForwardEnv names host environment variables (names or doublestar
	// globs) that enter the sandbox; EnvSkip withholds names even so.
	ForwardEnv, EnvSkip []string
	// Env is added to every command's environment after the fixed base
	// (the cluster pool's cache variables: internal/app).
	Env []string
	// SyncPaths are host files or directories (config the tools need, task
	// files) copied into the sandbox at the same path when it is claimed,
	// read-only there, and never brought back.
	SyncPaths []string
	// JournalSize caps the session's journal of host files that pull-backs
	// overwrote or deleted (zero: sync.DefaultJournalSize).
	JournalSize int64
	// Watch keeps the host side's manifests in memory, current from
	// file-system events (sync.Host.Watch), for a process that runs many
	// commands on the session (sbx-mcp): a command then costs what changed
	// on the host, not a walk of every code dir. A full verification scan
	// runs off the critical path every VerifyEvery while commands come.
	Watch bool
	// MemoryWorkspace keeps a small tree's workspaces in memory where the
	// backend can (workspace.go): config workspace = "auto".
	MemoryWorkspace bool
	// Prewalk starts the walk of the first command's host-side scan in
	// Open, beside the load of the sync state (sync.HostDir.Prewalk), for a
	// caller that runs its command right after Open (sbx exec). A change
	// made on the host between Open and that command may then reach the
	// sandbox at the next round trip instead, as one made during a scan
	// does: nothing is lost, but a caller that writes to the code dirs
	// after Open and expects its first command to see it must leave this
	// off. Not used by a watching session.
	Prewalk bool
}

// VerifyEvery is how often a watching session checks its watches with a
// full scan of its code dirs, between commands (when at least one ran).
var VerifyEvery = sbxsync.VerifyEvery

// ErrCodeDirs means a kept session exists for other code directories.
var ErrCodeDirs = errors.New("session has other code directories")

// Session is one open session.
type Session struct {
	// Set by Open, then only read: no lock.
	m      *Manager
	name   string
	dir    string
	params Params

	// Three locks, always taken in this order:
	//   - run serializes this process's commands and the sync's round trips
	//     (Exec, Spawn's start and its job's end, Release's last pull-back)
	//     and is held for a whole command;
	//   - the lock file (lock(dir), state.go) does the same across processes
	//     (sbx exec and sbx-mcp on one kept session) and guards the state
	//     directory: info.json, the sync's manifests, the workspaces, the
	//     audit log; taken after run;
	//   - mu guards the fields marked "mu" and is held briefly, so that
	//     Release can stop a running command instead of waiting for it, and
	//     Info and Notices answer while one runs. One exception: a claim
	//     (ensureClaimed, the provider's Claim) runs with mu held, so they
	//     wait for a sandbox being claimed.
	// A field marked "run" is only touched with run held (some writers hold
	// mu as well); one marked "mu" only with mu held (all writers of
	// pendingGit and stubs hold run as well).
	run    sync.Mutex
	mu     sync.Mutex
	info   Info            // mu; saved to info.json under the lock file
	saved  Info            // mu: what info.json holds but for LastUsed (saveInfo)
	sync   *sbxsync.Host   // run: the pointer is set by Open, its methods called with run held
	sb     sandbox.Sandbox // mu: read under it, then used without it (a job's Exec runs beside commands, Release beside both)
	gitcfg gitConfigState  // run, not mu: installGitConfig reads and fills it without mu
	// pendingGit goes into the sandbox with the next round trip, and stubs
	// with the first one of a new sandbox.
	pendingGit []pendingFile               // mu
	stubs      []sbxsync.HelperFile        // mu
	jobs       map[*Job]context.CancelFunc // mu

	hooks         hooksState      // run: the host's core.hooksPath, for the sync (refreshHooks, in roundTrip)
	hinted        map[string]bool // mu: the hints (hints.go) already given
	warnedRefused bool            // mu (commandEnv runs under it)
	notices       []string        // mu (note; noteLocking takes it)
	closed        bool            // mu
	// lastRelease is what the pull-back before the release did.
	lastRelease sbxsync.Report // run (finalPull)
	fold        foldState      // run: the command round that stands for the final pull (release.go)
	// dropped is closed when a dropped sandbox's release has ended; the
	// next claim waits for it (mu).
	dropped chan struct{}
	// usage counts each workspace's disk from events (Params.Watch); run.
	usage []*sbxsync.Usage
	// placeable: the sandbox was just claimed and no round trip has run
	// in it yet (placeFirstPush, place.go); run.
	placeable bool
	// work is the directory of the workspaces (workRoot): the state dir's
	// work, or one in memory (workspace.go). Guarded by run.
	work string
	// first is the first round trip's host half, begun beside the claim
	// (firstround.go); run.
	first *firstRound
	// stopVerify ends the verification of a watching session (Params.Watch).
	stopVerify     chan struct{}
	stopVerifyOnce sync.Once
}

// Open returns the named session, reattaching to its sandbox when it was kept.
// A kept sandbox found unusable is cleaned up and reported in Notices.
func (m *Manager) Open(ctx context.Context, name string, p Params) (*Session, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	for _, d := range p.CodeDirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return nil, fmt.Errorf("code dir %q must be a clean absolute path", d)
		}
	}
	dir := filepath.Join(m.root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create session state directory: %w (set XDG_STATE_HOME to a writable directory)", err)
	}
	m.sweepTrash(m.trashDir()) // what a killed remover left (release.go)
	s := &Session{m: m, name: name, dir: dir, params: p}
	l, err := lock(dir)
	if err != nil {
		return nil, fmt.Errorf("lock session %s: %w", name, err)
	}
	defer l.unlock()
	info, err := readInfo(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.info = s.newInfo()
	case err != nil:
		s.note(fmt.Sprintf("session %s: unreadable state (%v): cleaned up", name, err))
		s.wipe()
		s.info = s.newInfo()
	default:
		if info.Claimed && !slices.Equal(info.CodeDirs, p.CodeDirs) {
			return nil, fmt.Errorf("%w: session %s was claimed for %s, this call is for %s: release it first (sbx release --session %s) or use another --session",
				ErrCodeDirs, name, strings.Join(info.CodeDirs, ", "), strings.Join(p.CodeDirs, ", "), name)
		}
		s.info, s.saved = info, info
		s.info.Keep = s.info.Keep || p.Keep
		if info.Claimed {
			sb, err := m.prov.Attach(ctx, s.spec())
			var stale *sandbox.StaleError
			switch {
			case err == nil:
				s.sb = sb
			case errors.As(err, &stale), errors.Is(err, sandbox.ErrNotFound):
				s.note(fmt.Sprintf("session %s: %s; cleaned up, a new sandbox will be claimed", name, staleReason(info, err)))
				s.wipe()
				s.info = s.newInfo()
			default:
				return nil, fmt.Errorf("reattach session %s: %w", name, err)
			}
		}
	}
	var dirs []sbxsync.HostDir
	for _, d := range p.CodeDirs {
		dirs = append(dirs, sbxsync.HostDir{Path: d, Exclude: append(append([]string{}, neverPushed...), p.Exclude...), Prewalk: p.Prewalk && !p.Watch})
	}
	if s.sync, err = sbxsync.OpenHost(dir, dirs); err != nil {
		return nil, fmt.Errorf("session %s: %w", name, err)
	}
	s.sync.SetDiskLimit(p.Limits.DiskBytes)
	if s.sync.Journal, err = m.Journal(name, p.JournalSize); err != nil {
		return nil, err
	}
	if s.sb == nil {
		s.sync.Reset()
	}
	if p.Watch {
		s.sync.Watch(m.log)
		for i := range p.CodeDirs {
			s.usage = append(s.usage, sbxsync.NewUsage(s.workDir(i)))
		}
		s.stopVerify = make(chan struct{})
		go s.verifyLoop()
	}
	return s, nil
}

// verifyLoop runs the watching session's verification scans: every
// VerifyEvery, when a command ran since the last one. Only its beginning
// and end take the run lock, each for a comparison; the scan runs beside
// commands (one that runs meanwhile voids it).
func (s *Session) verifyLoop() {
	t := time.NewTicker(VerifyEvery)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-s.stopVerify:
			return
		case <-t.C:
		}
		s.run.Lock()
		v, rounds := s.sync.BeginVerify(), s.sync.Rounds()
		s.run.Unlock()
		if v == nil || rounds == last {
			continue
		}
		if err := v.Scan(); err != nil {
			s.m.log.Debug("sync verification scan", "session", s.name, "err", err)
			continue
		}
		s.run.Lock()
		_, n := v.Finish(s.m.log)
		s.run.Unlock()
		if n == 0 {
			last = rounds
		}
	}
}

// stopWatching ends the verification and closes the watches (after a
// command that runs).
func (s *Session) stopWatching() {
	if s.stopVerify == nil {
		return
	}
	s.stopVerifyOnce.Do(func() {
		close(s.stopVerify)
		s.run.Lock()
		s.sync.Close()
		for _, u := range s.usage {
			u.Close()
		}
		s.usage = nil
		s.run.Unlock()
	})
}

func (s *Session) newInfo() Info {
	now := time.Now().UTC()
	return Info{
		Name: s.name, Backend: s.m.prov.Name(), CodeDirs: s.params.CodeDirs,
		Network: string(s.params.Network), Keep: s.params.Keep, Created: now, LastUsed: now,
		IdleTTL: s.params.IdleTTL.String(),
	}
}

// note records msg for Notices. Called with mu held (or before Open
// returns the session); noteLocking takes mu itself.
func (s *Session) note(msg string) {
	msg = escape.Line(msg) // notes name sandbox-chosen paths; they reach terminals
	s.m.log.Warn(msg)
	s.notices = append(s.notices, msg)
}

// noteLocking is note for a caller that does not hold mu (Release and its
// last pull-back, which run beside a command's end and a reader of Notices).
func (s *Session) noteLocking(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note(msg)
}

// Notices returns what happened to the session that its user should know
// (a stale sandbox cleaned up), and forgets them.
func (s *Session) Notices() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notices
	s.notices = nil
	return n
}

// Name returns the session's name.
func (s *Session) Name() string { return s.name }

// Info returns the session's saved state.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *Session) spec() sandbox.Spec {
	spec := sandbox.Spec{
		Name: s.name, StateDir: s.dir, Network: s.params.Network,
		Limits: s.params.Limits, IdleTTL: s.params.IdleTTL, Progress: s.params.Progress,
	}
	if s.inMemory() {
		spec.WorkRoot = s.workRoot()
	}
	for i, d := range s.params.CodeDirs {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: s.workDir(i), Target: d})
	}
	for i, p := range s.params.SyncPaths {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: s.syncPathCopy(i), Target: p, ReadOnly: true})
	}
	return spec
}

func (s *Session) workDir(i int) string { return filepath.Join(s.workRoot(), strconv.Itoa(i)) }

// wipe removes everything the session keeps on disk but its lock.
func (s *Session) wipe() {
	s.removeWorkspaces()
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if e.Name() != "lock" {
			cache.Remove(filepath.Join(s.dir, e.Name())) // read-only directories and all
		}
	}
}

// claim starts a sandbox with empty workspaces; the first round trip of
// the sync fills them. Called with run, the lock file and mu held.
func (s *Session) claim(ctx context.Context) error {
	if s.dropped != nil {
		select {
		case <-s.dropped:
			s.dropped = nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the lost sandbox's cleanup: %w", ctx.Err())
		}
	}
	s.discardFirstRound()
	// The last sandbox's files go, wherever they were: the new sandbox
	// found them.
	s.removeWorkspaces()
	if err := s.chooseWorkRoot(); err != nil {
		return fmt.Errorf("record where the workspaces are: %w", err)
	}
	for i, d := range s.params.CodeDirs {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("code dir: %w", err)
		}
		w := s.workDir(i)
		if err := os.MkdirAll(w, 0o700); err != nil {
			return fmt.Errorf("create workspace: %w", err)
		}
		os.Chmod(w, fi.Mode().Perm())
	}
	if err := s.copySyncPaths(); err != nil {
		return err
	}
	s.sync.Reset()
	if s.fold.asked && s.fold.round == 0 && len(s.jobs) == 0 {
		// The round that stands for the final pull (foldBegin) is this
		// first one, begun below: its full scan is asked for before.
		s.sync.FullScanNext()
		s.sync.EndsAfterNext()
		s.fold.round = s.sync.Rounds() + 1
	}
	s.startFirstRound(ctx)
	start := time.Now()
	sb, err := s.m.prov.Claim(ctx, s.spec())
	if err != nil {
		s.discardFirstRound()
		s.removeWorkspaces()
		return fmt.Errorf("claim %s sandbox: %w", s.m.prov.Name(), err)
	}
	s.m.log.Debug("claimed sandbox", "session", s.name, "backend", s.m.prov.Name(), "took", time.Since(start))
	if s.usage != nil {
		// The workspaces may have moved (disk, memory): count the new ones.
		for i, u := range s.usage {
			u.Close()
			s.usage[i] = sbxsync.NewUsage(s.workDir(i))
		}
	}
	s.stubs = s.stubFiles()
	s.sb = sb
	s.placeable = true
	s.info.Claimed = true
	return s.saveInfo()
}

// saveInfo saves s.info: in full when more than its last use changed, else
// as a time stamp on the file (most commands change nothing else, and a
// rewrite, write and rename, is most of a warm command's bookkeeping).
// Called with mu held, under the lock file.
func (s *Session) saveInfo() error {
	if sameInfo(s.info, s.saved) {
		if err := touchInfo(s.dir, s.info.LastUsed); err == nil {
			return nil
		}
	}
	if err := writeInfo(s.dir, s.info); err != nil {
		return err
	}
	s.saved = s.info
	return nil
}

// Run is one command to run in the session's sandbox.
type Run struct {
	// Command is a shell command line, run with Shell -c. Ignored when Argv
	// is set.
	Command string
	// Shell is the shell for Command; empty means /bin/sh.
	Shell string
	// Argv runs a program directly (no shell, no cwd tracking).
	Argv []string
	// Dir is the working directory in the sandbox; empty means the session's
	// current directory (where the previous command's shell ended), or the
	// first code dir.
	Dir     string
	Env     []string // added to the sandbox's fixed environment
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Timeout time.Duration
	TTY     *sandbox.TTY
	// NoClaim runs the command only in the sandbox the session holds: it
	// fails with ErrNoSandbox where another command would claim one (none
	// claimed yet, or the one it held found gone). For work on no user's
	// behalf (the host daemon's first round trip), which must never start a
	// sandbox for a session released meanwhile.
	NoClaim bool
}

// ErrNoSandbox is a NoClaim command's: the session holds no live sandbox.
var ErrNoSandbox = errors.New("the session holds no live sandbox")

// Outcome is how a command ended and what the sync did around it.
type Outcome struct {
	sandbox.Result
	// Cwd is the shell's working directory when it ended.
	Cwd string
	// Sync says what went in and came back: counts, refusals, conflicts and
	// quarantined files.
	Sync sbxsync.Report
	// Route is the router's decision for a shell command (Where is empty
	// for Argv and TTY commands, which always run in the sandbox).
	Route router.Decision
}

// ErrSync means the command ran but its changes could not be brought back
// (or the host's could not be sent in); the reason follows.
var ErrSync = errors.New("sync failed")

// BaseEnv is the sandbox's fixed environment. Nothing from the host's
// environment enters the sandbox.
func BaseEnv(tty bool) []string {
	term := "dumb"
	if tty {
		term = "xterm-256color"
	}
	return []string{
		"PATH=" + sandbox.StubDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin",
		"HOME=" + sandbox.Home, "LANG=C.UTF-8", "TERM=" + term, "CI=1", "GIT_TERMINAL_PROMPT=0",
	}
}

// ErrClosed means the session was released or closed.
var ErrClosed = errors.New("session is closed")

// Exec runs r in the sandbox, claiming it on first use, and brings back what
// the command changed in the code dirs.
func (s *Session) Exec(ctx context.Context, r Run) (Outcome, error) {
	s.run.Lock()
	defer s.run.Unlock()
	l, err := lock(s.dir)
	if err != nil {
		return Outcome{}, fmt.Errorf("lock session %s: %w", s.name, err)
	}
	defer l.unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Outcome{}, ErrClosed
	}
	if s.sb == nil {
		s.attachClaimedMeanwhile(ctx)
	}
	if r.NoClaim && s.sb == nil {
		s.mu.Unlock()
		return Outcome{}, ErrNoSandbox
	}
	err = s.ensureClaimed(ctx)
	var watches []*identityWatch
	if r.TTY == nil {
		// Output sbx collects (an MCP call's) is watched for what needs a
		// hint; a file or terminal of the caller's stays as it is, so that
		// the command writes to it directly.
		_, fout := r.Stdout.(*os.File)
		_, ferr := r.Stderr.(*os.File)
		if !fout && !ferr {
			r.Stdout, r.Stderr, watches = watchIdentity(r.Stdout, r.Stderr)
		}
	}
	cmd, cwd, dir := s.command(r, true)
	sb := s.sb
	s.mu.Unlock()
	if err != nil {
		return Outcome{}, err
	}
	var (
		res         sandbox.Result
		rep         sbxsync.Report
		decision    router.Decision
		untrackedIn string // where an untracked command starts, and so ends
	)
	s.installGitConfig(ctx)
	if r.Argv == nil && r.TTY == nil {
		decision = s.route(r.Command, dir)
		if decision.KeepsDir && s.sync.SyncedDir(dir) {
			// A dir outside the code dirs, or not carried by the sync,
			// may be gone in the sandbox without the host knowing: the
			// wrapper's cd then falls back and reports where it went.
			untrackedIn = untracked(cmd, cwd, r, dir, s.fallbackDir())
		}
	}
	if decision.Where == router.Host {
		res, rep, err = s.runOnHost(ctx, sb, decision, r)
	} else {
		s.foldBegin()
		res, rep, err = s.roundTrip(ctx, sb, cmd)
		s.foldEnd(rep, err)
	}
	if errors.Is(err, sandbox.ErrUnreachable) && r.NoClaim {
		err = fmt.Errorf("%w: %v", ErrNoSandbox, err)
	} else if errors.Is(err, sandbox.ErrUnreachable) {
		// The sandbox died while idle (killed, expired): nothing ran. Claim a
		// new one, push the host tree, and run the command there.
		s.mu.Lock()
		s.dropSandbox(fmt.Sprintf("the sandbox was gone (%v); a new one was claimed and the host tree pushed into it", err))
		err = s.ensureClaimed(ctx)
		sb = s.sb
		s.mu.Unlock()
		if err == nil {
			s.installGitConfig(ctx)
			if decision.Where == router.Host {
				res, rep, err = s.runOnHost(ctx, sb, decision, r)
			} else {
				res, rep, err = s.roundTrip(ctx, sb, cmd)
			}
		}
	}
	if decision.Where != "" {
		e := auditEntry{Time: time.Now().UTC(), Command: r.Command, Cwd: dir, Where: string(decision.Where),
			Reason: decision.Reason, ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds()}
		if err != nil {
			e.Error = err.Error()
		}
		s.audit(e)
	}
	if untrackedIn != "" && (err == nil || errors.Is(err, ErrSync)) && !res.FellBack {
		// What the wrapper's report would have said: it cannot have
		// moved.
		cwd.Write([]byte(untrackedIn + "\n"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.finish(res, rep, err, cwd)
	out.Route = decision
	s.giveHints(watches, rep)
	return out, err
}

// syncOnly is a round trip around a command that does nothing: the host's
// changes go in and the sandbox's come back (around a host command, and
// before and after a background job).
func (s *Session) syncOnly(ctx context.Context, sb sandbox.Sandbox) (sbxsync.Report, error) {
	_, rep, err := s.roundTrip(ctx, sb, &sandbox.Cmd{Argv: []string{"/bin/true"}, Env: BaseEnv(false)})
	return rep, err
}

// roundTrip runs cmd as one round trip of the sync: the host's changes go
// in with it, the sandbox's come back with its end. Called with run and the
// lock file held, without mu.
func (s *Session) roundTrip(ctx context.Context, sb sandbox.Sandbox, cmd *sandbox.Cmd) (sandbox.Result, sbxsync.Report, error) {
	begun := time.Now()
	var (
		round *sbxsync.Round
		rep   sbxsync.Report
		err   error
	)
	if f := s.takeFirstRound(); f != nil {
		round, rep, err = f.round, f.rep, f.err
		s.m.log.Debug("first round's host half, beside the claim", "session", s.name, "took", f.took, "waited", time.Since(begun))
	} else {
		s.refreshHooks(ctx)
		round, rep, err = s.sync.Begin()
	}
	if err != nil {
		s.placeable = false
		return sandbox.Result{}, rep, fmt.Errorf("%w: %v", ErrSync, err)
	}
	s.placeFirstPush(sb, round)
	s.mu.Lock()
	stubs, git := s.stubs, s.pendingGit
	s.mu.Unlock()
	round.Request.Files = append(round.Request.Files, stubs...)
	for _, f := range git {
		round.Request.Files = append(round.Request.Files, f.HelperFile)
	}
	req, err := fastjson.Marshal(round.Request)
	if err != nil {
		return sandbox.Result{}, rep, err
	}
	// A round with nothing to push (a warm command's) writes its few bytes
	// of patches here; one with changes streams them from a goroutine, as
	// the sandbox reads them.
	var push io.Reader
	if !round.Changed() {
		var b bytes.Buffer
		if err := round.WritePush(&b); err != nil {
			return sandbox.Result{}, rep, fmt.Errorf("%w: %v", ErrSync, err)
		}
		push = &b
	} else {
		pushR, pushW := io.Pipe()
		go func() {
			// Through a buffer: each tar header and each file would
			// otherwise be a pipe hand-off of its own to the backend's
			// copy (and, on the local backend, a write(2) each).
			bw := pushWriters.Get().(*bufio.Writer)
			bw.Reset(pushW)
			err := round.WritePush(bw)
			if err == nil {
				err = bw.Flush()
			}
			bw.Reset(nil)
			pushWriters.Put(bw)
			pushW.CloseWithError(err)
		}()
		defer pushR.Close()
		push = pushR
	}
	pull := &pullSink{read: round.ReadPull, max: pullHeld}
	cmd.Sync = &sandbox.SyncIO{Request: req, Push: push, Pull: pull}
	t0 := time.Now()
	res, xerr := sb.Exec(ctx, cmd)
	perr := s.diskError(pull.finish())
	if perr == nil && xerr == nil {
		if werr := s.checkWorkspace(); werr != nil {
			round.Refuse()
			perr = werr
		}
	}
	t1 := time.Now()
	defer func() {
		s.m.log.Debug("round trip", "session", s.name, "begin", t0.Sub(begun), "exec+pull", t1.Sub(t0), "command", res.Duration, "apply", time.Since(t1))
	}()
	if len(res.SyncReply) == 0 {
		if xerr == nil {
			xerr = fmt.Errorf("%w: the sandbox sent no sync reply", ErrSync)
		}
		return res, rep, xerr
	}
	var reply sbxsync.HelperReply
	if err := fastjson.Unmarshal(res.SyncReply, &reply); err != nil {
		return res, rep, fmt.Errorf("%w: bad sync reply: %v", ErrSync, err)
	}
	if len(round.Request.Files) > 0 {
		s.mu.Lock() // round trips are serialized by s.run
		s.pendingGit, s.stubs = nil, nil
		s.gitConfigSent(git, reply.FileErrors)
		s.mu.Unlock()
	}
	frep, ferr := round.Finish(reply)
	frep.Applied += rep.Applied
	frep.Conflicts = append(rep.Conflicts, frep.Conflicts...)
	switch {
	case xerr != nil:
		return res, frep, xerr
	case perr != nil:
		frep.Lost, frep.LostCount = round.Seen(), reply.Sent
		return res, frep, fmt.Errorf("%w: the sandbox's changes were not brought back: %v", ErrSync, perr)
	case ferr != nil:
		return res, frep, fmt.Errorf("%w: %v", ErrSync, ferr)
	}
	return res, frep, nil
}

// pushWriters are the buffers a round's push is written through.
var pushWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// pullHeld is how much of a pull stream pullSink holds in memory before
// it reads the stream as it comes: a no-change round trip's pull is a few
// hundred bytes.
const pullHeld = 64 << 10

// pullSink feeds the sandbox's pull stream to read (Round.ReadPull). A pull
// of at most max bytes is held, and read once the command is done (finish)
// in the caller's goroutine: a warm command pays no goroutine and no pipe
// for it. A larger one starts read in a goroutine on a pipe and streams
// into it, so that memory holds at most max bytes of any pull; a refused
// stream is not read on (it may be over the disk limit): the sandbox's
// writes to it fail from then on.
type pullSink struct {
	read func(io.Reader) error
	max  int

	mu       sync.Mutex
	held     []byte
	pw       *io.PipeWriter
	done     chan error
	finished bool
}

func (p *pullSink) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return 0, io.ErrClosedPipe
	}
	if p.pw == nil {
		if len(p.held)+len(b) <= p.max {
			p.held = append(p.held, b...)
			return len(b), nil
		}
		pr, pw := io.Pipe()
		p.pw, p.done = pw, make(chan error, 1)
		go func() {
			err := p.read(pr)
			if err != nil {
				pr.CloseWithError(err)
			}
			io.Copy(io.Discard, pr)
			p.done <- err
		}()
		held := p.held
		p.held = nil
		if _, err := pw.Write(held); err != nil {
			return 0, err
		}
	}
	return p.pw.Write(b)
}

// finish ends the stream and returns read's error.
func (p *pullSink) finish() error {
	p.mu.Lock()
	pw, held := p.pw, p.held
	p.held, p.finished = nil, true
	p.mu.Unlock()
	if pw == nil {
		return p.read(bytes.NewReader(held))
	}
	pw.Close()
	return <-p.done
}

// attachClaimedMeanwhile attaches to the sandbox another process of this
// session claimed after this one opened it without one (two first `sbx exec
// --keep` calls at once): a claim here would remove that sandbox's
// workspace and leave it running. The sync state that process wrote is read
// again by the round trip (sync.Host.Begin). Called with the lock file and
// mu held.
func (s *Session) attachClaimedMeanwhile(ctx context.Context) {
	info, err := readInfo(s.dir)
	if err != nil || !info.Claimed || !slices.Equal(info.CodeDirs, s.params.CodeDirs) {
		return
	}
	s.work = "" // where the other process put the workspaces (workroot)
	sb, err := s.m.prov.Attach(ctx, s.spec())
	if err != nil {
		return // claimed anew below, as a sandbox found gone is
	}
	for i, u := range s.usage {
		u.Close()
		s.usage[i] = sbxsync.NewUsage(s.workDir(i))
	}
	keep := s.info.Keep
	s.info, s.saved = info, info
	s.info.Keep = s.info.Keep || keep
	s.sb = sb
}

func (s *Session) ensureClaimed(ctx context.Context) error {
	if s.sb != nil {
		return nil
	}
	return s.claim(ctx)
}

// command builds the sandbox command for r. When trackCwd is set, the shell
// reports where it ended on fd 3, into the returned report.
func (s *Session) command(r Run, trackCwd bool) (*sandbox.Cmd, *cwdReport, string) {
	dir := r.Dir
	if dir == "" {
		dir = s.info.Cwd
	}
	if dir == "" && len(s.params.CodeDirs) > 0 {
		dir = s.params.CodeDirs[0]
	}
	cmd := &sandbox.Cmd{
		Dir: dir, Env: s.commandEnv(r.TTY != nil, r.Env), Stdin: r.Stdin,
		Stdout: r.Stdout, Stderr: r.Stderr, Timeout: r.Timeout, TTY: r.TTY,
	}
	cwd := &cwdReport{}
	if r.Argv != nil {
		cmd.Argv = r.Argv
		return cmd, cwd, dir
	}
	shell := r.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	fallback := s.fallbackDir()
	cmd.Dir = "/"
	track := ""
	if trackCwd {
		track = "track"
		cmd.Fd3 = cwd
	}
	cmd.Argv = []string{"/bin/sh", "-c", shellWrapper, "sbx", r.Command, dir, fallback, shell, track}
	if !trackCwd || r.TTY != nil || !filepath.IsAbs(shell) || filepath.Base(shell) != "bash" {
		return cmd, cwd, dir
	}
	if script := bashEnvScript(dir, fallback); script != nil {
		// The common case, an agent's bash call: bash starts directly,
		// with the wrapper's part that must run in it (cd, the EXIT trap)
		// read from fd 4 through BASH_ENV. Where the image has no bash the
		// sh wrapper runs instead, as for every other shell.
		cmd.Argv = []string{shell, "-c", r.Command, "bash"}
		cmd.Env = append(cmd.Env, "BASH_ENV=/dev/fd/4")
		cmd.Fd4 = script
		cmd.Fallback = []string{"/bin/sh", "-c", "unset BASH_ENV\n" + shellWrapper, "sbx", r.Command, dir, fallback, shell, track}
	}
	return cmd, cwd, dir
}

// fallbackDir is where a command starts when its directory is gone: the
// first code dir, else /.
func (s *Session) fallbackDir() string {
	if len(s.params.CodeDirs) > 0 {
		return s.params.CodeDirs[0]
	}
	return "/"
}

// untracked makes cmd, a bash command that reads the wrapper's script from
// fd 4 (BASH_ENV), the same command without the wrapper when it cannot
// change its shell's directory (router.Decision.KeepsDir), starts in a
// directory the sync carries (sync.Host.SyncedDir), and its environment
// hands bash no code of its own (BASH_ENV, an exported function): bash
// starts directly in dir, the backend's DirFallback standing in for the
// script's cd (the same line on stderr should a job in the sandbox have
// removed dir meanwhile, PWD naming where it starts, and Result.FellBack
// moving the session's directory there, in finish), and nothing reports
// where it ended: it ends where it started (Exec records that, as the
// report would have said). It returns dir, or "" when cmd stays as it was. That saves the script,
// its fd 4 pipe, the EXIT trap and the fd 3 report: a quarter of a
// millisecond of a warm bash call in the local sandbox. Anything else is
// left as it was.
func untracked(cmd *sandbox.Cmd, cwd *cwdReport, r Run, dir, fallback string) string {
	if cmd.Fd4 == nil || cmd.Fd3 != cwd || len(cmd.Argv) != 4 || cmd.Argv[1] != "-c" {
		return ""
	}
	env := make([]string, 0, len(cmd.Env))
	for _, kv := range cmd.Env {
		switch {
		case kv == "BASH_ENV=/dev/fd/4":
			continue // the wrapper's own
		case strings.HasPrefix(kv, "BASH_ENV="), strings.HasPrefix(kv, "BASH_FUNC_"):
			return ""
		}
		env = append(env, kv)
	}
	cmd.Env, cmd.Fd3, cmd.Fd4 = env, nil, nil
	cmd.Dir, cmd.DirFallback = dir, fallback
	// Without bash, the sh wrapper, in the directory the backend chose.
	cmd.Fallback = []string{"/bin/sh", "-c", shellWrapper, "sbx", r.Command, ".", fallback, cmd.Argv[0], ""}
	return dir
}

// bashEnvScript is what bash reads from BASH_ENV (fd 4) before a tracked
// command, as shellWrapper's sh stage and heredoc did: it unsets BASH_ENV
// and closes fd 4 first, so that no child shell reads it and the command
// sees neither; it starts in dir, or in fallback when dir is gone (and says
// so); and its EXIT trap reports where the shell ended on fd 3. The
// directories are single-quoted (any byte but NUL is safe there). nil when
// they cannot be carried this way (a NUL, or a script over sandbox.MaxFd4):
// the sh wrapper then runs the command.
func bashEnvScript(dir, fallback string) []byte {
	if strings.ContainsRune(dir, 0) || strings.ContainsRune(fallback, 0) {
		return nil
	}
	d, f := shQuote(dir), shQuote(fallback)
	script := "unset BASH_ENV; exec 4<&-\n" +
		"cd -- " + d + " 2>/dev/null || { printf 'sbx: %s no longer exists; running in %s\\n' " + d + " " + f + " >&2; cd -- " + f + " || exit 1; }\n" +
		"trap 'pwd -P 2>/dev/null >&3' EXIT\n"
	if len(script) > sandbox.MaxFd4 {
		return nil
	}
	return []byte(script)
}

// shQuote quotes s for a POSIX shell: in single quotes, each quote of s
// closing them, escaped, and opening them again.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shellWrapper runs a command ($1) as `bash -c "$1"` (or `sh -c`) would, so
// the command's errors read as the shell's own ("bash: line 1: ..."), with
// the command's own line numbers: $0 is the shell's name and the command
// text is the whole -c string. It starts in $2, or in $3 when $2 is gone
// (and says so). $4 is the shell asked for; where the image lacks it (a
// minimal image such as busybox has no bash) the sh on PATH runs the
// command. When $5 is "track", an EXIT trap reports where the shell ended
// on fd 3, so the next command starts there (a cd holds between commands,
// variables do not): bash gets the trap from BASH_ENV, read from fd 4
// before the command and then closed and unset, so nothing of it shows in
// the command's text, errors or environment; another shell, which has no
// BASH_ENV, gets it on the command's first line, which keeps the line
// numbers. A tracked bash command without a terminal (the bash tool's)
// skips this sh stage: bash starts directly with bashEnvScript, and this
// wrapper is its fallback where the image has no bash (the runner runs
// sandbox.Cmd.Fallback then).
const shellWrapper = `cd -- "$2" 2>/dev/null || { printf 'sbx: %s no longer exists; running in %s\n' "$2" "$3" >&2; cd -- "$3" || exit 1; }
[ -x "$4" ] || set -- "$1" "$2" "$3" sh "$5"
[ "$5" = track ] || exec "$4" -c "$1" "${4##*/}"
if [ "${4##*/}" = bash ]; then
	exec 4<<'SBX'
trap 'pwd -P 2>/dev/null >&3' EXIT; unset BASH_ENV; exec 4<&-
SBX
	BASH_ENV=/dev/fd/4 exec "$4" -c "$1" bash
fi
exec "$4" -c "trap 'pwd -P 2>/dev/null >&3' EXIT; $1" "${4##*/}"
`

// dropSandbox forgets a sandbox that is gone; the next command claims a new
// one. Called with run and mu held (it resets gitcfg and the sync, run's).
func (s *Session) dropSandbox(why string) {
	s.discardFirstRound()
	s.note(fmt.Sprintf("session %s: %s", s.name, why))
	if s.sb != nil {
		// Clean up what it left, off the caller's path; the next claim
		// waits for it, since a backend's cleanup may share the session's
		// state directory with the new sandbox (local's rootfs and socket).
		sb, done := s.sb, make(chan struct{})
		s.dropped = done
		go func() {
			defer close(done)
			sb.Release(context.Background())
		}()
	}
	s.sb = nil
	s.info.Claimed = false
	s.gitcfg = gitConfigState{}
	s.pendingGit, s.stubs = nil, nil
	s.sync.Reset()
}

// finish records how a command ended. Called with run and mu held.
func (s *Session) finish(res sandbox.Result, rep sbxsync.Report, err error, cwd *cwdReport) (Outcome, error) {
	if errors.Is(err, sandbox.ErrLost) && !s.closed {
		s.dropSandbox(fmt.Sprintf("the sandbox was lost while the command ran (%v): what the command changed in the sandbox is lost; the host tree is intact and the next command gets a new sandbox", err))
	}
	out := Outcome{Result: res, Sync: rep}
	if c, why := cwd.path(); why != "" {
		s.note(fmt.Sprintf("the command's working directory report on fd 3 was ignored: %s; the next command starts in %s", why, s.startDir()))
	} else if c != "" {
		out.Cwd = c
		s.info.Cwd = c
	} else if res.FellBack {
		// An untracked command whose directory was gone started in the
		// fallback (untracked): so does the next.
		out.Cwd = s.fallbackDir()
		s.info.Cwd = out.Cwd
	}
	s.info.LastUsed = time.Now().UTC()
	if werr := s.saveInfo(); werr != nil && err == nil {
		err = werr
	}
	return out, err
}

// cwdReport collects what the shell writes to fd 3 when it ends: its
// working directory. The sandbox chooses every byte, so it keeps at most
// sandbox.MaxFd3 bytes (the backends pass on one byte more at most) and
// only notes that there was more. No lock: the backend writes it during
// Exec, the session reads it after Exec returns.
type cwdReport struct {
	buf  []byte
	over bool
}

func (c *cwdReport) Write(p []byte) (int, error) {
	if room := sandbox.MaxFd3 - len(c.buf); len(p) > room {
		c.buf = append(c.buf, p[:max(room, 0)]...)
		c.over = true
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// path returns the reported directory ("" when none was reported), or why
// the report is refused: more than PATH_MAX bytes, or not one clean
// absolute path on one line.
func (c *cwdReport) path() (dir, refused string) {
	if c.over {
		return "", fmt.Sprintf("it is over %d bytes (PATH_MAX)", sandbox.MaxFd3-1)
	}
	p := strings.TrimSuffix(string(c.buf), "\n")
	switch {
	case p == "":
		return "", ""
	case len(p) > sandbox.MaxFd3-1:
		return "", fmt.Sprintf("it is over %d bytes (PATH_MAX)", sandbox.MaxFd3-1)
	case strings.ContainsAny(p, "\x00\n"), !filepath.IsAbs(p), filepath.Clean(p) != p:
		return "", fmt.Sprintf("%s is not one clean absolute path", quoteCut(p, 80))
	}
	return p, ""
}

// quoteCut quotes s (escaping what a terminal would act on), cut to n bytes.
func quoteCut(s string, n int) string {
	if len(s) > n {
		return strconv.Quote(s[:n]) + "..."
	}
	return strconv.Quote(s)
}

// startDir is where the next command starts (s.mu held).
func (s *Session) startDir() string {
	if s.info.Cwd != "" {
		return s.info.Cwd
	}
	if len(s.params.CodeDirs) > 0 {
		return s.params.CodeDirs[0]
	}
	return "/"
}

// Job is a command started by Spawn.
type Job struct {
	done chan struct{}
	out  Outcome
	err  error
}

// Wait waits for the job and returns how it ended.
func (j *Job) Wait() (Outcome, error) {
	<-j.done
	return j.out, j.err
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Spawn starts r in the background (a job that outlives the call, as an
// agent's run_in_background). Other commands of the session run meanwhile;
// the job does not move the session's working directory. When it ends, what
// it changed is brought back like after any command. Cancelling ctx kills it.
func (s *Session) Spawn(ctx context.Context, r Run) (*Job, error) {
	s.run.Lock()
	l, err := lock(s.dir)
	if err != nil {
		s.run.Unlock()
		return nil, fmt.Errorf("lock session %s: %w", s.name, err)
	}
	s.mu.Lock()
	if s.closed {
		err = ErrClosed
	} else {
		err = s.ensureClaimed(ctx)
	}
	cmd, cwd, _ := s.command(r, false)
	sb := s.sb
	s.mu.Unlock()
	if err == nil {
		// The job starts on the host's current tree.
		_, err = s.syncOnly(ctx, sb)
	}
	l.unlock()
	s.run.Unlock()
	if err != nil {
		return nil, err
	}
	j := &Job{done: make(chan struct{})}
	jctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.jobs == nil {
		s.jobs = map[*Job]context.CancelFunc{}
	}
	s.jobs[j] = cancel
	s.mu.Unlock()
	go func() {
		defer close(j.done)
		defer cancel()
		res, err := sb.Exec(jctx, cmd)
		// Bring back what the job changed, in turn with other commands.
		s.run.Lock()
		defer s.run.Unlock()
		s.mu.Lock()
		delete(s.jobs, j)
		closed := s.closed
		s.mu.Unlock()
		if closed {
			j.out, j.err = Outcome{Result: res}, err
			return
		}
		l, lerr := lock(s.dir)
		if lerr != nil {
			j.out, j.err = Outcome{Result: res}, lerr
			return
		}
		defer l.unlock()
		var rep sbxsync.Report
		if err == nil || errors.Is(err, context.Canceled) {
			rep, err = s.syncOnly(context.Background(), sb)
			if err == nil {
				err = jctx.Err()
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		j.out, j.err = s.finish(res, rep, err, cwd)
	}()
	return j, nil
}

// Close releases the sandbox unless the session is kept.
func (s *Session) Close(ctx context.Context) error {
	if s.Info().Keep {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		go s.stopWatching() // after a command that runs
		return nil
	}
	return s.Release(ctx)
}

// Release kills everything in the sandbox, deletes it and the session's
// state. Changes were already brought back after each command.
func (s *Session) Release(ctx context.Context) error {
	// Background jobs end first, each bringing back what it changed.
	s.mu.Lock()
	jobs := maps.Clone(s.jobs)
	s.mu.Unlock()
	for j, cancel := range jobs {
		cancel()
		select {
		case <-j.done:
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	if s.closed && s.sb == nil {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sb := s.sb
	s.mu.Unlock()
	// What the sandbox changed since its last pull-back (a process left
	// running, a pull-back that could not be applied) comes back first, or
	// is named as lost. A command still running is killed with the sandbox
	// (that is what a release does), and its pull-back then fails.
	if sb != nil {
		if s.run.TryLock() {
			if !s.folded() {
				s.finalPull(ctx, sb)
			}
			s.run.Unlock()
		} else {
			s.noteLocking(fmt.Sprintf("session %s: released while a command ran: it was killed, and what it changed in the sandbox since it started is lost with the sandbox", s.name))
		}
	}
	if held, err := s.m.HeldDeletions(s.name); err == nil && len(held) > 0 {
		var files []string
		for _, h := range held {
			files = append(files, h.HeldFiles()...)
		}
		s.noteLocking(fmt.Sprintf("session %s: the deletions of %s the sandbox made still wait, after the release too: sbx accept --deletions --session %s applies them (--reject-deletions drops them)", s.name, listCut(files, 10), s.name))
	}
	s.mu.Lock()
	s.sb = nil
	s.mu.Unlock()
	// Killing the sandbox ends a running command; wait for its pull back
	// before the state goes.
	var rerr error
	t0 := time.Now()
	if sb != nil {
		rerr = sb.Release(ctx)
	}
	t1 := time.Now()
	s.stopWatching()
	s.run.Lock()
	defer s.run.Unlock()
	if err := s.m.release(ctx, s.name, nil); rerr == nil {
		rerr = err
	}
	s.m.log.Debug("released", "session", s.name, "sandbox", t1.Sub(t0), "state", time.Since(t1))
	return rerr
}

// finalPull brings back what the sandbox changed since the last round trip,
// before a release; what cannot come back is named in a notice. Called with
// s.run held.
func (s *Session) finalPull(ctx context.Context, sb sandbox.Sandbox) {
	l, err := lock(s.dir)
	if err != nil {
		s.noteLocking(fmt.Sprintf("session %s: lock it for the last pull-back: %v; released without it", s.name, err))
		return
	}
	defer l.unlock()
	// Both sides scan in full: the last chance for what no event reported
	// (a write through a shared mmap).
	s.sync.FullScanNext()
	s.sync.EndsAfterNext()
	rep, err := s.syncOnly(ctx, sb)
	s.lastRelease = rep
	if err != nil {
		what := "what the sandbox changed since its last command"
		if len(rep.Lost) > 0 {
			what = fmt.Sprintf("%s, and whatever the refused pull-back held after them", listCut(rep.Lost, 20))
			if rep.LostCount > len(rep.Lost) {
				what = fmt.Sprintf("%s, among them %s", plural(rep.LostCount, "change"), listCut(rep.Lost, 20))
			}
		}
		s.noteLocking(fmt.Sprintf("session %s: the last pull-back before the release failed (%v): lost with the sandbox: %s", s.name, err, what))
	}
	var kept []string
	for _, r := range rep.Refused {
		kept = append(kept, r.Path)
	}
	if len(kept) > 0 {
		s.noteLocking(fmt.Sprintf("session %s: changes the rules keep in the sandbox are lost with it: %s", s.name, listCut(kept, 20)))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// listCut joins at most n items, saying how many more there are.
func listCut(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

func (m *Manager) release(ctx context.Context, name string, sb sandbox.Sandbox) error {
	dir := filepath.Join(m.root, name)
	l, err := lock(dir)
	if err != nil {
		return fmt.Errorf("lock session %s: %w", name, err)
	}
	defer l.unlock()
	var rerr error
	if sb != nil {
		rerr = sb.Release(ctx)
	}
	if err := m.removeState(dir); err != nil && rerr == nil {
		rerr = err
	}
	return rerr
}

// ErrNoSession means there is no session of that name.
var ErrNoSession = errors.New("no such session")

// Release releases the named session, whether or not its sandbox still runs.
func (m *Manager) Release(ctx context.Context, name string) error {
	_, err := m.ReleaseNotes(ctx, name)
	return err
}

// ReleaseNotes releases the named session as Release does, bringing back
// first what its sandbox changed since its last command, and returns what
// its user should know (what could not come back).
func (m *Manager) ReleaseNotes(ctx context.Context, name string) ([]string, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(m.root, name)
	info, err := readInfo(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (sbx ls lists sessions)", ErrNoSession, name)
	}
	var notes []string
	if err == nil && info.Claimed {
		p := m.Params
		p.CodeDirs, p.Keep = info.CodeDirs, true
		s, oerr := m.Open(ctx, name, p)
		if oerr == nil {
			rerr := s.Release(ctx)
			return s.Notices(), rerr
		}
		notes = append(notes, fmt.Sprintf("session %s: could not reattach to bring back its last changes (%v); released as it is", name, oerr))
	}
	var sb sandbox.Sandbox
	if err == nil && info.Claimed {
		sb, _ = m.prov.Attach(ctx, sandbox.Spec{Name: name, StateDir: dir})
	}
	return notes, m.release(ctx, name, sb)
}

// List returns every session under the root, oldest first. A session whose
// sandbox has died or expired is cleaned up and returned with Stale set.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	entries, err := os.ReadDir(m.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range entries {
		if !e.IsDir() || CheckName(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(m.root, e.Name())
		info, err := readInfo(dir)
		if err != nil {
			continue
		}
		if info.Claimed {
			sb, err := m.prov.Attach(ctx, sandbox.Spec{Name: info.Name, StateDir: dir})
			if err != nil {
				info.Stale = "session " + info.Name + ": " + staleReason(info, err)
				m.release(ctx, info.Name, nil)
			} else {
				_ = sb // attached only to check it; the sandbox stays as it is
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// ReleaseAll releases every session and returns their names.
func (m *Manager) ReleaseAll(ctx context.Context) ([]string, error) {
	infos, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	for _, info := range infos {
		if info.Stale != "" {
			continue
		}
		if err := m.Release(ctx, info.Name); err != nil && !errors.Is(err, ErrNoSession) {
			errs = append(errs, err)
			continue
		}
		names = append(names, info.Name)
	}
	return names, errors.Join(errs...)
}

// staleReason explains why a kept session's sandbox is gone: expired when it
// was idle past its idle_ttl (the sandbox releases itself then), else what the
// backend found.
func staleReason(info Info, err error) string {
	if ttl, perr := time.ParseDuration(info.IdleTTL); perr == nil && ttl > 0 {
		if idle := time.Since(info.LastUsed); idle > ttl {
			return fmt.Sprintf("its sandbox expired after being idle for more than its idle_ttl of %s (last used %s)", ttl, info.LastUsed.Local().Format(time.DateTime))
		}
	}
	return err.Error()
}
