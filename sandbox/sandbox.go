// Package sandbox is the contract between the session engine and its backends.
//
// A Provider claims a Sandbox; a Sandbox runs commands (Exec) and is released
// (Release). Everything else sbx does (file sync, file tools, stubs) is built on
// Exec, so every backend behaves the same. This package has no dependencies on
// the engine or on any backend: backends import it, never the engine.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Provider creates sandboxes and finds the ones it created earlier.
type Provider interface {
	// Name is the backend's name as users write it ("local", "cluster").
	Name() string
	// Claim creates a new sandbox for spec. It reports slow progress through
	// spec.Progress when set.
	Claim(ctx context.Context, spec Spec) (Sandbox, error)
	// Attach finds the sandbox a previous Claim with the same spec.StateDir
	// left running. It returns ErrNotFound when there is none and a *StaleError
	// when one was left but is no longer usable (its state is then cleaned up).
	Attach(ctx context.Context, spec Spec) (Sandbox, error)
}

// Sandbox is one claimed sandbox.
type Sandbox interface {
	// Exec runs cmd and waits for it. A non-zero exit is not an error: it is in
	// Result. An error means the command could not be run or its outcome is
	// unknown (the sandbox was lost, the request was refused).
	Exec(ctx context.Context, cmd *Cmd) (Result, error)
	// Release kills everything in the sandbox and deletes it. It is idempotent.
	Release(ctx context.Context) error
}

// Network is what the sandbox can reach.
type Network string

const (
	// NetworkNone gives the sandbox a loopback interface of its own and nothing else.
	NetworkNone Network = "none"
	// NetworkHost shares the host's network.
	NetworkHost Network = "host"
)

// Mount makes the host directory (or file) Source appear at Target inside
// the sandbox, read-write unless ReadOnly. Target is an absolute path.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Limits bound what the commands of one sandbox may use. Zero means no limit.
type Limits struct {
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	Pids        int   `json:"pids,omitempty"`
	// DiskBytes bounds what one command may bring back to the host and the
	// sandbox's workspace; a backend may also bound each file by it
	// (RLIMIT_FSIZE).
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// Spec describes the sandbox to claim.
type Spec struct {
	// Name is the session's name, used for labels and messages.
	Name string
	// StateDir is a directory private to this session where the backend may
	// keep its files. It exists before Claim is called.
	StateDir string
	// WorkRoot, when set, is another directory private to this session
	// that holds some of its Mounts' sources: the workspaces kept in memory
	// (a tmpfs; see the local backend's MemoryWorkRoot). The backend treats
	// what lies below it as it treats StateDir's, and must bound what the
	// sandbox writes there by its memory limit.
	WorkRoot string
	Mounts   []Mount
	Network  Network
	Limits   Limits
	// IdleTTL releases the sandbox after it has run nothing for this long.
	// Zero means never.
	IdleTTL time.Duration
	// Progress, when set, receives human-readable lines about slow steps.
	Progress func(msg string)
}

// Cmd is one command to run in a sandbox.
type Cmd struct {
	// Argv is the program and its arguments; Argv[0] is looked up in Env's
	// PATH when it has no slash, or in DefaultPath when Env has no PATH.
	Argv []string
	// Dir is the working directory inside the sandbox; empty means "/".
	Dir string
	// DirFallback, when set, is where the command starts when Dir is gone
	// (or is no directory) by the time it starts, after the sync's push:
	// the backend then writes "sbx: DIR no longer exists; running in
	// FALLBACK" and a newline to the command's stderr first, as the shell
	// wrapper's own cd did, and Result.FellBack says so. Either way the
	// command's PWD names the directory it starts in, as a shell's cd
	// would leave it.
	DirFallback string
	// Env is the complete environment of the command.
	Env []string
	// Stdin is the command's standard input; nil means closed (/dev/null).
	Stdin io.Reader
	// Stdout and Stderr receive the command's output. nil discards it. When
	// both are the same writer, output is interleaved in the order it was
	// produced.
	Stdout, Stderr io.Writer
	// Fd3, when set, receives what the command writes to file descriptor 3.
	// The engine uses it to learn the shell's final working directory. A
	// backend hands it at most MaxFd3+1 bytes (one past the bound, so that
	// an overlong report can be told apart) and discards the rest.
	Fd3 io.Writer
	// Fd4, when not empty, is what the command reads on file descriptor 4: a pipe
	// the backend fills with these bytes, in the sandbox, before the command
	// starts, and then closes the writing end of. At most MaxFd4 bytes (a
	// backend refuses more). The engine hands the shell wrapper's script to
	// bash this way (BASH_ENV=/dev/fd/4), so that bash starts directly,
	// without a shell before it.
	Fd4 []byte
	// Fallback, when set, runs instead of Argv where Argv[0], an absolute
	// path, is not an executable file in the sandbox (an image without
	// bash). Its Argv[0] is looked up as Argv[0] is. Fd3, Fd4 and Env are
	// the same for it.
	Fallback []string
	// Timeout kills the command and everything it started once it has run for
	// this long; the result then has TimedOut set and ExitCode 124. Zero means
	// no timeout.
	Timeout time.Duration
	// TTY, when set, runs the command on a new pseudo-terminal: Stdin feeds
	// its input and Stdout receives its output (Stderr is unused).
	TTY *TTY
	// Sync, when set, makes the exec one round trip of the code sync: the
	// backend's in-sandbox helper reads the host's changes from Sync.Push and
	// applies them before the command, and writes the sandbox's changes to
	// Sync.Pull after it. The backend only carries the bytes.
	Sync *SyncIO
}

// DefaultPath is where a program is looked up when the command's Env has
// no PATH, as execvp does. It is not added to the command's environment.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// MaxFd3 bounds the cwd report a command writes to fd 3: an absolute path of
// at most PATH_MAX (4096) bytes and its newline. The sandbox chooses every
// byte of it, so the host keeps no more than this (plus one byte, to see
// that there was more): `head -c 1G /dev/zero >&3` costs the host no memory.
const MaxFd3 = 4096 + 1

// MaxFd4 bounds Cmd.Fd4: it fits a pipe's buffer whatever the kernel's
// per-user pipe limits leave (one page), so the backend writes it in full
// before the command starts and nothing waits on the command to read it.
const MaxFd4 = 4096

// Fd3Writer passes the first MaxFd3+1 bytes written to it on to w and
// discards the rest. It drains rather than failing: a closed fd 3 would
// kill the shell's exit trap with SIGPIPE and change the command's exit
// status.
func Fd3Writer(w io.Writer) io.Writer { return &capWriter{w: w, left: MaxFd3 + 1} }

type capWriter struct {
	w    io.Writer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.left > 0 {
		n := min(len(p), c.left)
		c.left -= n
		if _, err := c.w.Write(p[:n]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// SyncIO carries one round trip of the sync protocol (see package sync).
type SyncIO struct {
	// Request is the helper's request, JSON, opaque to the backend.
	Request []byte
	Push    io.Reader
	Pull    io.Writer
}

// TTY describes the terminal of an interactive command.
type TTY struct {
	Size WindowSize
	// Resize delivers later window sizes; it may be nil.
	Resize <-chan WindowSize
}

// WindowSize is a terminal size in character cells.
type WindowSize struct {
	Rows, Cols uint16
}

// Result is how a command ended.
type Result struct {
	ExitCode int
	TimedOut bool
	// Signal names the signal that killed the command, if one did, as
	// SignalName does ("SIGKILL" after a timeout).
	Signal   string
	Duration time.Duration
	// SyncReply is the helper's reply, JSON, when the Cmd had Sync.
	SyncReply []byte
	// FellBack says that the command started in Cmd.DirFallback, its Dir
	// being gone (the engine then moves the session's directory there).
	FellBack bool
}

// TimeoutExitCode is the exit code of a command killed by its timeout, as
// with coreutils timeout(1).
const TimeoutExitCode = 124

// ErrNotFound means there is no sandbox to attach to.
var ErrNotFound = errors.New("no sandbox found")

// ErrLost means the sandbox went away while it was in use.
var ErrLost = errors.New("sandbox lost")

// ErrUnreachable means the sandbox was found gone before a command started:
// nothing of the command ran, so it may be run again in a new sandbox.
var ErrUnreachable = fmt.Errorf("%w before the command started", ErrLost)

// StaleError reports a sandbox whose state was left behind but which can no
// longer be used (its init died, or it expired). The backend has cleaned it up.
type StaleError struct {
	Name   string
	Reason string
}

func (e *StaleError) Error() string {
	return "sandbox of session " + e.Name + " is stale: " + e.Reason
}
