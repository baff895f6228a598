// Package hostd is the host daemon of a kept CLI session: one small
// long-lived process per session, started in the background by the first
// `sbx exec --keep` (or `sbx shell --keep`) that ran without one. It holds
// the session open with its host side kept current from file-system events
// (session.Params.Watch, as sbx-mcp holds its sessions), and later `sbx exec
// --keep` calls of that session run their command through it: the round
// trip then costs what changed on the host, not a scan of every code dir.
//
// What it promises:
//   - Its socket is <session state dir>/hostd.sock. The client dials it only
//     when that directory is its own user's and private (0700) and the
//     socket its user's; the daemon serves only peers of its own uid
//     (SO_PEERCRED), only requests for its own session made with the same
//     set-up (Key: configuration, flags, state root, binary), each frame
//     bounded (MaxRequest) and parsed strictly (ParseRequest).
//   - It never outlives its session: it ends on `sbx release` (Stop), when
//     the session's state says released or claimed anew, when its socket
//     was removed or replaced, when the sandbox is gone, and after
//     IdleLimit (or the session's idle_ttl, if shorter) without a request.
//   - A client that finds no daemon, a dead one (a stale socket), or one
//     that refuses, runs the command itself as without a daemon, and says
//     so only at debug level. Once the daemon said "started" the command is
//     its: the client never runs it a second time.
//   - Watching falls back as it does in sbx-mcp: an overflow, the watch
//     limit or a dead watcher make the next round trip a full scan.
package hostd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/version"
)

// errUnsupported: without SO_PEERCRED (other systems than Linux) there is
// no daemon; every call scans.
var errUnsupported = errors.New("the host daemon needs Linux")

// IdleLimit is how long a daemon waits for a request before it ends (the
// session stays; the next call starts a new daemon).
const IdleLimit = 30 * time.Minute

// Arg is the hidden subcommand that runs a daemon: `sbx __hostd STATEDIR`.
const Arg = "__hostd"

// envStart carries the starter's set-up to the daemon.
const envStart = "SBX_HOSTD_START"

// SocketPath is the daemon's socket for a session's state dir, or "" when
// the path is too long for a unix socket (then there is no daemon).
func SocketPath(stateDir string) string {
	p := filepath.Join(stateDir, "hostd.sock")
	if stateDir == "" || len(p) > 104 {
		return ""
	}
	return p
}

// Key is what a request and its daemon must share: the configuration, the
// session's parameters, the state root, the session and the binary itself
// (a rebuilt sbx starts a daemon of its own). It is "" when it cannot be
// computed (then there is no daemon).
func Key(w *app.Env, stateDir, sessionName string) string {
	k, _ := key(w, stateDir, sessionName)
	return k
}

func key(w *app.Env, stateDir, sessionName string) (string, error) {
	// Every field of the parameters but the callbacks (Progress), which
	// cannot differ between two calls of the same binary.
	p := map[string]any{}
	pv := reflect.ValueOf(w.Params)
	for i := 0; i < pv.NumField(); i++ {
		if f := pv.Type().Field(i); f.IsExported() && f.Type.Kind() != reflect.Func {
			p[f.Name] = pv.Field(i).Interface()
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(struct {
		Config                  any
		Params                  any
		Backend, StateDir, Name string
		Version, Exe            string
		ExeSize, ExeMTime       int64
	}{w.Config, p, w.Provider.Name(), stateDir, sessionName, version.String(), exe, fi.Size(), fi.ModTime().UnixNano()})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// startInfo is what the starter tells the daemon.
type startInfo struct {
	Flags   app.Flags
	Session string
	Key     string
	Cwd     string
}

// lockName is the daemons' lock file in the state dir: one serves.
const lockName = "hostd.lock"

// privateDir checks that dir is a directory of this user's that no one else
// may enter or write (0700 or narrower). A client's connect checks the same
// on the descriptor it connects through (dialPrivate).
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory (%v)", dir, fi.Mode())
	}
	if err := ownedByUs(fi); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}
