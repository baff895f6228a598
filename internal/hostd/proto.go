package hostd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// The wire: each message is a frame, a 4-byte big-endian length and that
// many bytes of JSON. The client sends one Request (an exec carries the
// command's stdout and stderr as SCM_RIGHTS on the frame's length); the
// daemon answers with Replies: a refusal, or "started" then "done" for an
// exec. While a command runs, any byte from the client, or the end of its
// connection, cancels it (the client was interrupted).

// MaxRequest bounds a request frame (the command line and the caller's
// environment): a larger one is refused, and the client runs the command
// itself.
const MaxRequest = 1 << 20

// MaxReply bounds a reply frame the client reads (what a round trip
// reports: refusals, conflicts, held and lost paths).
const MaxReply = 16 << 20

// maxEnv bounds the number of environment entries of a request.
const maxEnv = 4096

// Request is one call of a client.
type Request struct {
	// Op is "exec" (run Command), "status" or "stop".
	Op string `json:"op"`
	// Session is the session's name; the daemon serves only its own.
	Session string `json:"session"`
	// Key is the client's set-up (Key): a daemon started with another
	// refuses.
	Key string `json:"key"`
	// Command is the shell command line of an exec, Dir where it starts
	// (inside a code dir), Env the caller's environment (what the session
	// forwards from and what a host command runs with).
	Command string   `json:"command,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Env     []string `json:"env,omitempty"`
}

// Reply is one message of the daemon.
type Reply struct {
	// Refused says why the daemon will not serve this request (the client
	// then runs the command itself).
	Refused string `json:"refused,omitempty"`
	// Started: the command was accepted; from here the client waits for
	// Done (it no longer runs the command itself).
	Started bool `json:"started,omitempty"`
	// Done ends an exec: how it ended and what the sync did.
	Done        bool           `json:"done,omitempty"`
	ExitCode    int            `json:"exit_code,omitempty"`
	TimedOut    bool           `json:"timed_out,omitempty"`
	Interrupted bool           `json:"interrupted,omitempty"`
	Error       string         `json:"error,omitempty"`
	Sync        sbxsync.Report `json:"sync"`
	Notices     []string       `json:"notices,omitempty"`
	// Status: the daemon's pid, the commands it ran, and whether its host
	// side watches (false: each round trip scans in full).
	Pid      int    `json:"pid,omitempty"`
	Served   uint64 `json:"served,omitempty"`
	Watching bool   `json:"watching,omitempty"`
}

// writeFrame writes v as one frame.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	_, err = w.Write(append(buf, b...))
	return err
}

// readFrame reads one frame's body of at most max bytes, the length
// already read into head (nil: read it).
func readFrame(r io.Reader, head []byte, max int) ([]byte, error) {
	if head == nil {
		head = make([]byte, 4)
		if _, err := io.ReadFull(r, head); err != nil {
			return nil, err
		}
	}
	n := binary.BigEndian.Uint32(head)
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("a frame of %d bytes, over the bound of %d", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("a frame cut short: %w", err)
	}
	return b, nil
}

// ParseRequest reads a request frame's body: known fields only, each
// checked (a known op, a valid session name, a key of 64 hex digits, a
// clean absolute dir, an environment of NAME=VALUE entries), nothing else
// accepted.
func ParseRequest(b []byte) (Request, error) {
	var r Request
	if len(b) > MaxRequest {
		return r, fmt.Errorf("a request of %d bytes, over the bound of %d", len(b), MaxRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("a request that is not its JSON: %w", err)
	}
	if dec.More() {
		return Request{}, errors.New("a request followed by more")
	}
	if err := r.check(); err != nil {
		return Request{}, err
	}
	if len(r.Env) == 0 {
		r.Env = nil // one form for "none"
	}
	return r, nil
}

func (r Request) check() error {
	switch r.Op {
	case "exec", "status", "stop":
	default:
		return fmt.Errorf("unknown op %q", r.Op)
	}
	if err := session.CheckName(r.Session); err != nil {
		return err
	}
	if !isKey(r.Key) {
		return errors.New("a key that is not 64 hex digits")
	}
	if r.Op != "exec" {
		if r.Command != "" || r.Dir != "" || len(r.Env) > 0 {
			return fmt.Errorf("op %s takes no command, dir or environment", r.Op)
		}
		return nil
	}
	if r.Command == "" || strings.IndexByte(r.Command, 0) >= 0 {
		return errors.New("an exec needs a command without NUL bytes")
	}
	if !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) != r.Dir || strings.IndexByte(r.Dir, 0) >= 0 {
		return fmt.Errorf("dir %q is not a clean absolute path", r.Dir)
	}
	if len(r.Env) > maxEnv {
		return fmt.Errorf("%d environment entries, over the bound of %d", len(r.Env), maxEnv)
	}
	for _, kv := range r.Env {
		if i := strings.IndexByte(kv, '='); i <= 0 || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("environment entry %q is not NAME=VALUE", kv)
		}
	}
	return nil
}

func isKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
