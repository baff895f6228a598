package hostd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/internal/app"
)

// ErrAbsent means no daemon took the call: none runs, its socket is stale,
// it refused, or the state dir is not private. The caller runs the command
// itself.
var ErrAbsent = errors.New("no host daemon took the call")

// ErrLost means the daemon ended while it ran the command: its exit status
// is unknown, and what it changed comes back with the session's next
// command (the sync's state survives a process that dies).
var ErrLost = errors.New("the session's host daemon ended during the command")

// Call is one command for a session's daemon.
type Call struct {
	StateDir, Session, Key string
	Command, Dir           string
	Env                    []string
	// Stdout and Stderr are passed to the daemon, which hands them to the
	// command as they are.
	Stdout, Stderr *os.File
}

// dial connects to the daemon of stateDir after checking that the
// directory and the socket are this user's and private, through a
// descriptor of the directory checked (dialPrivate).
func dial(ctx context.Context, stateDir string) (*net.UnixConn, error) {
	if !supported {
		return nil, errUnsupported
	}
	sock := SocketPath(stateDir)
	if sock == "" {
		return nil, errors.New("the state dir's path is too long for a unix socket")
	}
	return dialPrivate(ctx, stateDir, sock)
}

// Exec runs c.Command through the session's daemon. An error wrapping
// ErrAbsent means it did not run (run it yourself); any other error
// means it ran, or may have, and must not run again.
func Exec(ctx context.Context, c Call, log *slog.Logger) (Reply, error) {
	conn, err := dial(ctx, c.StateDir)
	if err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrAbsent, err)
	}
	defer conn.Close()
	req := Request{Op: "exec", Session: c.Session, Key: c.Key, Command: c.Command, Dir: c.Dir, Env: c.Env}
	body, err := json.Marshal(req)
	if err != nil || len(body) > MaxRequest {
		return Reply{}, fmt.Errorf("%w: the request is over %d bytes (a large environment)", ErrAbsent, MaxRequest)
	}
	head := []byte{byte(len(body) >> 24), byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	rights := syscall.UnixRights(int(c.Stdout.Fd()), int(c.Stderr.Fd()))
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := conn.WriteMsgUnix(head, rights, nil); err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrAbsent, err)
	}
	if _, err := conn.Write(body); err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrAbsent, err)
	}
	// The daemon may first finish another command of the session: no
	// deadline for its answer but the caller's.
	conn.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { conn.CloseWrite() })
	defer stop()
	first, err := readReply(conn)
	if err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrAbsent, err)
	}
	if first.Refused != "" {
		return Reply{}, fmt.Errorf("%w: it refused: %s", ErrAbsent, first.Refused)
	}
	if !first.Started {
		return Reply{}, fmt.Errorf("%w: its first answer was neither started nor a refusal", ErrAbsent)
	}
	log.Debug("the command runs through the session's host daemon", "session", c.Session)
	done, err := readReply(conn)
	if err != nil || !done.Done {
		return Reply{}, fmt.Errorf("%w (%v): its exit status is unknown; what it changed comes back with the session's next command", ErrLost, err)
	}
	log.Debug("host daemon", "session", c.Session, "served", done.Served, "watching", done.Watching)
	return done, nil
}

func readReply(r io.Reader) (Reply, error) {
	b, err := readFrame(r, nil, MaxReply)
	if err != nil {
		return Reply{}, err
	}
	var rep Reply
	if err := json.Unmarshal(b, &rep); err != nil {
		return Reply{}, fmt.Errorf("an answer that is not its JSON: %w", err)
	}
	return rep, nil
}

// call sends a request without descriptors and reads one reply.
func call(ctx context.Context, stateDir string, req Request, timeout time.Duration) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, stateDir)
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if err := writeFrame(conn, req); err != nil {
		return Reply{}, err
	}
	return readReply(conn)
}

// Status asks the session's daemon how it is.
func Status(ctx context.Context, stateDir, sessionName, key string) (Reply, error) {
	return call(ctx, stateDir, Request{Op: "status", Session: sessionName, Key: key}, 5*time.Second)
}

// stopKey is the key of a stop request: a release stops the daemon whatever
// its set-up.
var stopKey = fmt.Sprintf("%064x", 0)

// Stop ends the session's daemon, if one runs, and waits (within timeout)
// until it has closed its session and its socket: a release that follows
// finds no process of the session's left. A command the daemon runs is
// interrupted, as a release interrupts one.
func Stop(ctx context.Context, stateDir, sessionName string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, stateDir)
	if err != nil {
		return nil // none runs, or none this user may reach
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := writeFrame(conn, Request{Op: "stop", Session: sessionName, Key: stopKey}); err != nil {
		return fmt.Errorf("stop the session's host daemon: %w", err)
	}
	// It answers, then closes the connection as it exits.
	if rep, err := readReply(conn); err == nil && rep.Refused != "" {
		return fmt.Errorf("stop the session's host daemon: it refused: %s", rep.Refused)
	}
	io.Copy(io.Discard, conn)
	if ctx.Err() != nil {
		return fmt.Errorf("stop the session's host daemon: it did not end within %s", timeout)
	}
	return nil
}

// maxLog bounds the daemons' log: over it, the next daemon starts it anew.
const maxLog = 1 << 20

// Start starts the session's daemon in the background (detached, its log
// in the state dir's hostd.log) when this system has one; it returns at
// once. A daemon that finds another already serving the session ends.
func Start(stateDir, sessionName, key string, flags app.Flags, cwd string, log *slog.Logger) {
	if !supported || SocketPath(stateDir) == "" || key == "" || privateDir(stateDir) != nil {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	raw, err := json.Marshal(startInfo{Flags: flags, Session: sessionName, Key: key, Cwd: cwd})
	if err != nil {
		return
	}
	// The log is kept across daemons of the session, up to maxLog.
	logPath := filepath.Join(stateDir, "hostd.log")
	mode := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fi, err := os.Lstat(logPath); err == nil && fi.Size() > maxLog {
		mode |= os.O_TRUNC
	}
	logf, err := os.OpenFile(logPath, mode, 0o600)
	if err != nil {
		return
	}
	defer logf.Close()
	// The daemons' lock, made here (the daemon only opens it).
	lf, err := os.OpenFile(filepath.Join(stateDir, lockName), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		log.Debug("start the session's host daemon", "err", err)
		return
	}
	lf.Close()
	cmd := exec.Command(exe, Arg, stateDir)
	cmd.Env = append(os.Environ(), envStart+"="+string(raw))
	cmd.Stderr = logf
	cmd.Dir = cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		log.Debug("start the session's host daemon", "err", err)
		return
	}
	cmd.Process.Release()
}
