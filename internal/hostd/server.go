package hostd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/sandbox"
	"github.com/sbx-sh/sbx/session"
)

// tick is how often the daemon checks that its session still stands.
const tick = 2 * time.Second

// Main runs the daemon when this binary was started as one (`sbx __hostd
// STATEDIR`) and returns its exit status.
func Main(args []string) int {
	level := slog.LevelInfo
	if os.Getenv("SBX_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(newBoundedLog(os.Stderr, maxLog), &slog.HandlerOptions{Level: level}))
	if len(args) != 1 {
		log.Error("host daemon: want one argument, the session's state dir")
		return 2
	}
	if err := run(args[0], log); err != nil {
		log.Error("host daemon", "dir", args[0], "err", err)
		return 1
	}
	return 0
}

type daemon struct {
	dir, key, name string
	sock           string
	sockIno        uint64
	w              *app.Env
	s              *session.Session
	log            *slog.Logger
	ln             *net.UnixListener

	run    sync.Mutex // one command at a time (and the environment it has)
	served atomic.Uint64
	last   atomic.Int64 // unix nanoseconds of the last request's end
	active atomic.Int32
	// ident is the session's record as this daemon last saw it: another
	// process that claimed anew or released changes it.
	identMu sync.Mutex
	ident   session.Info
	// cancel interrupts the running command (a stop).
	cancelMu sync.Mutex
	cancel   context.CancelFunc
	quit     chan string
	quitOnce sync.Once
}

func run(dir string, log *slog.Logger) error {
	var si startInfo
	if err := json.Unmarshal([]byte(os.Getenv(envStart)), &si); err != nil {
		return fmt.Errorf("%s: %w", envStart, err)
	}
	os.Unsetenv(envStart)
	sock := SocketPath(dir)
	if sock == "" {
		return errors.New("the state dir's path is too long for a unix socket")
	}
	if err := privateDir(dir); err != nil {
		return err
	}
	// One daemon per session: the first to lock serves, others end. The
	// file is made by Start, never here: a daemon that starts while the
	// session is released must make nothing in a directory being removed
	// (the release's removal failed with "directory not empty").
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		log.Debug("host daemon: the session was released meanwhile", "dir", dir)
		return nil
	}
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		log.Debug("host daemon: another serves the session", "dir", dir)
		return nil
	}
	info, err := readInfo(dir)
	if err != nil || !info.Claimed {
		return nil // released meanwhile, or never claimed: nothing to hold
	}
	w, err := app.Setup(si.Flags, app.PerCommand, log)
	if err != nil {
		return err
	}
	if k := Key(w, dir, si.Session); k != si.Key || k == "" {
		return errors.New("the configuration changed since the daemon was asked for: not serving")
	}
	w.Params.Watch = true
	os.Chdir("/")
	s, err := w.Manager.Open(context.Background(), si.Session, w.Params)
	if err != nil {
		return err
	}
	for _, n := range s.Notices() {
		log.Info("session notice", "note", n)
	}
	d := &daemon{dir: dir, key: si.Key, name: si.Session, sock: sock, w: w, s: s, log: log, quit: make(chan string, 1), ident: s.Info()}
	if !d.ident.Claimed {
		s.Close(context.Background())
		return nil
	}
	os.Remove(sock) // stale: its daemon is gone (this one holds the lock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		s.Close(context.Background())
		return err
	}
	ln.SetUnlinkOnClose(false)
	os.Chmod(sock, 0o600)
	if fi, err := os.Lstat(sock); err == nil {
		d.sockIno = fi.Sys().(*syscall.Stat_t).Ino
	}
	d.ln = ln
	d.last.Store(time.Now().UnixNano())
	log.Info("host daemon serving", "session", si.Session, "socket", sock, "pid", os.Getpid())
	go d.accept()
	// Arm the watches now (the first scan is a full one), so the next
	// command already costs what changed.
	go d.warm()
	why := d.watchLife()
	log.Info("host daemon ends", "session", si.Session, "why", why)
	d.shutdown()
	return nil
}

// warm runs one sync round trip (a /bin/true) for the watches' first scan.
func (d *daemon) warm() {
	d.run.Lock()
	defer d.run.Unlock()
	if !d.sameSession() {
		return
	}
	// Never claim a sandbox on no one's behalf: a dead one is left to the
	// next command (the daemon ends).
	if why := d.sandboxGone(); why != "" {
		d.end(why)
		return
	}
	d.active.Add(1)
	defer d.active.Add(-1)
	// NoClaim: the checks above can be overtaken (a release, the sandbox's
	// death between them and the round trip), and this round trip, on no
	// one's behalf, must not claim a sandbox for a released session (one
	// was left running after the daemon ended).
	out, err := d.s.Exec(context.Background(), session.Run{Argv: []string{"/bin/true"}, Dir: d.w.StartDir, NoClaim: true})
	if err != nil {
		d.log.Warn("host daemon: the first round trip failed", "err", err)
	}
	if out.Sync.Applied > 0 {
		d.log.Info("host daemon: the first round trip brought changes back", "applied", out.Sync.Applied)
	}
	d.noteIdent()
}

// watchLife returns why the daemon must end: stopped, idle, or its session
// no longer the one it holds.
func (d *daemon) watchLife() string {
	idle := IdleLimit
	if ttl := d.w.Params.IdleTTL; ttl > 0 && ttl < idle {
		idle = ttl
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case why := <-d.quit:
			return why
		case <-t.C:
		}
		if d.active.Load() == 0 && time.Since(time.Unix(0, d.last.Load())) > idle {
			return fmt.Sprintf("idle for %s", idle)
		}
		if why := d.gone(); why != "" {
			return why
		}
		if n%attachEvery == 0 && d.active.Load() == 0 {
			if why := d.sandboxGone(); why != "" {
				return why
			}
		}
	}
}

// attachEvery is how many ticks pass between two checks that the sandbox
// still serves (an attach, as sbx ls does).
const attachEvery = 15

// sandboxGone says why the session's sandbox no longer serves (killed,
// expired), or "": the daemon then ends instead of claiming a new one
// for the next command (the next sbx exec does that, as without a daemon).
func (d *daemon) sandboxGone() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := d.w.Provider.Attach(ctx, sandbox.Spec{Name: d.name, StateDir: d.dir})
	var stale *sandbox.StaleError
	if errors.As(err, &stale) || errors.Is(err, sandbox.ErrNotFound) {
		return "the sandbox is gone: " + err.Error()
	}
	return ""
}

// gone says why the daemon's session is no longer the one it holds, or "".
func (d *daemon) gone() string {
	fi, err := os.Lstat(d.sock)
	if err != nil || fi.Sys().(*syscall.Stat_t).Ino != d.sockIno {
		return "its socket was removed or replaced"
	}
	if d.active.Load() > 0 {
		return ""
	}
	if !d.sameSession() {
		return "the session was released or claimed anew by another process"
	}
	return ""
}

// sameSession reports whether the session's record still names the
// sandbox this daemon holds.
func (d *daemon) sameSession() bool {
	info, err := readInfo(d.dir)
	d.identMu.Lock()
	defer d.identMu.Unlock()
	return err == nil && info.Claimed && d.ident.Claimed && info.Created.Equal(d.ident.Created)
}

func (d *daemon) noteIdent() {
	d.identMu.Lock()
	d.ident = d.s.Info()
	d.identMu.Unlock()
}

func (d *daemon) end(why string) {
	d.quitOnce.Do(func() { d.quit <- why })
}

func (d *daemon) shutdown() {
	d.ln.Close()
	if fi, err := os.Lstat(d.sock); err == nil && fi.Sys().(*syscall.Stat_t).Ino == d.sockIno {
		os.Remove(d.sock)
	}
	d.cancelMu.Lock()
	if d.cancel != nil {
		d.cancel()
	}
	d.cancelMu.Unlock()
	// The command interrupted above ends its round trip before the
	// session closes (kept: the sandbox stays).
	d.run.Lock()
	d.s.Close(context.Background())
	d.run.Unlock()
}

func (d *daemon) accept() {
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				d.end("accept: " + err.Error())
			}
			return
		}
		go d.serve(c)
	}
}

// readRequest reads a request frame and the descriptors sent with it.
func readRequest(c *net.UnixConn) (Request, []*os.File, error) {
	head := make([]byte, 4)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(head, oob)
	if err != nil {
		return Request{}, nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return Request{}, nil, err
		}
		for _, m := range msgs {
			fds, err := syscall.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "caller"))
			}
		}
	}
	if n < 4 {
		if _, err := io.ReadFull(c, head[n:]); err != nil {
			return Request{}, files, err
		}
	}
	body, err := readFrame(c, head, MaxRequest)
	if err != nil {
		return Request{}, files, err
	}
	req, err := ParseRequest(body)
	return req, files, err
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (d *daemon) serve(c *net.UnixConn) {
	defer c.Close()
	if uid, err := peerUid(c); err != nil || uid != os.Getuid() {
		writeFrame(c, Reply{Refused: fmt.Sprintf("this daemon serves only uid %d, not %d (%v)", os.Getuid(), uid, err)})
		return
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	req, files, err := readRequest(c)
	defer closeAll(files)
	if err != nil {
		writeFrame(c, Reply{Refused: "a bad request: " + err.Error()})
		return
	}
	c.SetReadDeadline(time.Time{})
	if req.Session != d.name {
		writeFrame(c, Reply{Refused: fmt.Sprintf("this daemon serves session %s, not %s", d.name, req.Session)})
		return
	}
	switch req.Op {
	case "stop":
		writeFrame(c, Reply{Done: true, Pid: os.Getpid()})
		d.end("stopped (sbx release)")
		// The connection stays open until the process exits: the caller
		// waits on its end.
		select {}
	case "status":
		if req.Key != d.key {
			writeFrame(c, Reply{Refused: "another set-up"})
			return
		}
		writeFrame(c, Reply{Done: true, Pid: os.Getpid(), Served: d.served.Load(), Watching: d.w.Params.Watch})
		return
	}
	if req.Key != d.key {
		// The user's configuration or flags changed, or sbx was rebuilt:
		// this daemon is of no more use.
		writeFrame(c, Reply{Refused: "the call's set-up (configuration, flags, binary) differs from the daemon's"})
		d.end("a call came with another set-up")
		return
	}
	if len(files) != 2 {
		writeFrame(c, Reply{Refused: fmt.Sprintf("an exec sends its stdout and stderr, not %d descriptors", len(files))})
		return
	}
	inside := false
	for _, cd := range d.w.Params.CodeDirs {
		if app.Within(req.Dir, cd) {
			inside = true
		}
	}
	if !inside {
		writeFrame(c, Reply{Refused: fmt.Sprintf("%s is not inside the session's code dirs", req.Dir)})
		return
	}
	d.exec(c, req, files[0], files[1])
}

func (d *daemon) exec(c *net.UnixConn, req Request, stdout, stderr *os.File) {
	d.active.Add(1)
	defer d.active.Add(-1)
	d.run.Lock()
	defer d.run.Unlock()
	if !d.sameSession() {
		writeFrame(c, Reply{Refused: "the session was released or claimed anew by another process"})
		d.end("the session was released or claimed anew by another process")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.cancelMu.Lock()
	d.cancel = cancel
	d.cancelMu.Unlock()
	defer func() {
		d.cancelMu.Lock()
		d.cancel = nil
		d.cancelMu.Unlock()
	}()
	// The command runs with the caller's environment: what the session
	// forwards into the sandbox, and what a host command (git push) runs
	// with, are the caller's, as without a daemon.
	os.Clearenv()
	for _, kv := range req.Env {
		k, v, _ := cutEnv(kv)
		os.Setenv(k, v)
	}
	if err := writeFrame(c, Reply{Started: true}); err != nil {
		return
	}
	// Anything from the caller now, or its end, interrupts the command.
	go func() {
		var b [1]byte
		c.Read(b[:])
		cancel()
	}()
	out, err := d.s.Exec(ctx, session.Run{Command: req.Command, Dir: req.Dir,
		Stdout: safeOutput(stdout), Stderr: safeOutput(stderr), Timeout: d.w.Config.Timeout})
	stdout.Close()
	stderr.Close()
	d.served.Add(1)
	d.last.Store(time.Now().UnixNano())
	d.noteIdent()
	rep := Reply{Done: true, ExitCode: out.ExitCode, TimedOut: out.TimedOut, Sync: out.Sync,
		Notices: d.s.Notices(), Pid: os.Getpid(), Served: d.served.Load(), Watching: d.w.Params.Watch}
	if err != nil {
		rep.Error = err.Error()
		rep.Interrupted = ctx.Err() != nil
	}
	writeFrame(c, rep)
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// safeOutput hands a plain file or pipe to the sandbox as it is (no copy),
// but never the user's terminal: terminal ioctls on it would reach the host
// (as internal/cli does for its own).
func safeOutput(f *os.File) io.Writer {
	if term.IsTerminal(int(f.Fd())) {
		return struct{ io.Writer }{f}
	}
	return f
}

// readInfo reads the session's record (session.Info, info.json).
func readInfo(dir string) (session.Info, error) {
	var info session.Info
	raw, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if err != nil {
		return info, err
	}
	err = json.Unmarshal(raw, &info)
	return info, err
}
