package cluster

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/sandbox"
)

// Commands run through the in-pod helper (package inpod, command
// sbx-inpod): a small static binary uploaded into the pod once per claim
// (or found there already at the right version). A session starts one
// long-lived exec of it (the mux) and runs each command as a stream on
// that exec, so a command costs one message round trip instead of one
// pods/exec, and carries the host's changes in and the sandbox's out.
//
// The helper must be a static Linux binary of the pod's architecture. sbx
// looks for it in this order: the file named by SBX_INPOD_HELPER;
// sbx-inpod beside sbx's own executable (go install ./cmd/... puts it
// there); sbx itself, when it is static (it carries the helper too, at 14
// times the size). Build with CGO_ENABLED=0.

// EnvHelper names a static helper binary to upload.
const EnvHelper = "SBX_INPOD_HELPER"

// helperPath is where the helper lives in the pod.
const helperPath = sandbox.HelperPath

// errNoHelperBinary says that sbx has no helper binary to upload.
var errNoHelperBinary = errors.New("the cluster backend's helper")

// helperBinary opens the binary to upload.
func helperBinary() (*os.File, error) {
	if p := os.Getenv(EnvHelper); p != "" {
		if err := staticLinux(p); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvHelper, p, err)
		}
		return os.Open(p)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("this sbx is built for %s; the pod needs a Linux helper: set %s to a static sbx-inpod for linux/%s (CGO_ENABLED=0 GOOS=linux go build ./cmd/sbx-inpod)", runtime.GOOS, EnvHelper, runtime.GOARCH)
	}
	beside := filepath.Join(filepath.Dir(exe), "sbx-inpod")
	berr := staticLinux(beside)
	if berr == nil {
		return os.Open(beside)
	}
	if err := staticLinux(exe); err != nil {
		return nil, fmt.Errorf("no helper to upload into the pod: %s: %v; and %s: %v. Build it with CGO_ENABLED=0 go build -o %s ./cmd/sbx-inpod, or set %s", beside, berr, exe, err, beside, EnvHelper)
	}
	return os.Open(exe)
}

// helperHash is the SHA-256 of the helper binary sbx would upload, "" when
// there is none (then any helper of this protocol version is used).
var helperHash = sync.OnceValue(func() string {
	f, err := helperBinary()
	if err != nil {
		return ""
	}
	defer f.Close()
	h, err := inpod.Hash(f)
	if err != nil {
		return ""
	}
	return h
})

// staticLinux checks that path is a statically linked Linux executable.
func staticLinux(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("not found")
		}
		return fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (build it with CGO_ENABLED=0)")
		}
	}
	return nil
}

// UseWrapper makes s run its commands as sbx does when it has no helper to
// upload: each with one exec of the shell wrapper (wrapperScript), and a
// command with a sync refused. The e2e holds the wrapper to the backend
// conformance suite with it.
func (s *Sandbox) UseWrapper() {
	s.muxMu.Lock()
	defer s.muxMu.Unlock()
	s.noHelper = fmt.Errorf("%w: UseWrapper was called", errNoHelperBinary)
}

// helperMux returns the session's long-lived exec of the helper, starting
// it (and uploading the helper first when the pod lacks this version) when
// there is none or the last one broke.
func (s *Sandbox) helperMux(ctx context.Context) (*inpod.MuxClient, error) {
	s.muxMu.Lock()
	defer s.muxMu.Unlock()
	if s.mux != nil && !s.mux.Closed() {
		return s.mux, nil
	}
	if s.noHelper != nil {
		return nil, s.noHelper
	}
	s.mux = nil
	var errb boundedBuffer
	raw := func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		return s.stream(ctx, argv, stdin, stdout, &errb, nil)
	}
	if s.fresh && !s.preinstalled {
		// A pod just claimed has no helper unless its image does: upload
		// (or find it there) first, rather than fail a start.
		s.fresh = false
		if err := s.upload(ctx); err != nil {
			return nil, err
		}
	}
	// A pod whose pool preinstalls the helper (AnnotHelper) starts it at
	// once: one exec instead of two and no upload. Whatever answers there is
	// held to this build's hash by its greeting, as after an upload.
	preinstalled := s.fresh && s.preinstalled
	s.fresh = false
	start := time.Now()
	m, err := inpod.StartMux(ctx, raw, helperPath, helperHash())
	if err != nil && ctx.Err() == nil {
		// Absent, another version, or the exec failed: the pod may be gone
		// (then the caller says so); else upload and try once more.
		if lost := s.lost(ctx, err, false); lost != nil {
			return nil, lost
		}
		if preinstalled {
			s.p.log.Warn("the pool's preinstalled helper is not this sbx's build; uploading this one (update the pool's --helper-image to skip the upload)",
				"pod", s.pod, "want", inpod.Version+" "+helperHash(), "err", err)
		}
		if err := s.upload(ctx); err != nil {
			return nil, err
		}
		m, err = inpod.StartMux(ctx, raw, helperPath, helperHash())
	} else if err == nil && preinstalled {
		s.p.log.Debug("started the preinstalled helper", "pod", s.pod, "took", time.Since(start))
	}
	if err != nil {
		// The pod may have gone meanwhile.
		if lost := s.lost(ctx, err, false); lost != nil && ctx.Err() == nil {
			return nil, lost
		}
		return nil, fmt.Errorf("start the helper in pod %s/%s: %w %s", s.ns, s.pod, err, strings.TrimSpace(errb.String()))
	}
	s.mux = m
	s.ensureWatchLocked()
	return m, nil
}

// upload copies the helper into the pod. When sbx has no helper to
// upload it remembers that; when the upload fails because the pod is gone
// it says so. Called with muxMu held.
func (s *Sandbox) upload(ctx context.Context) error {
	bin, err := helperBinary()
	if err != nil {
		s.noHelper = fmt.Errorf("%w: %v", errNoHelperBinary, err)
		return s.noHelper
	}
	defer bin.Close()
	start := time.Now()
	// A pod that has this very build already (its image, or an earlier
	// claim of a persistent pod) keeps it, and the upload is not read. Two
	// uploads at once (a relay starting beside its first process) each
	// write a file of their own and rename it into place.
	script := `set -e; [ "$(` + helperPath + ` __inpod version 2>/dev/null)" != "$1" ] || exit 0
mkdir -p ` + sandbox.RunDir + `; chmod 700 ` + sandbox.RunDir + `; t=` + helperPath + `.new.$$; cat > "$t"; chmod 755 "$t"; mv "$t" ` + helperPath
	var errb bytes.Buffer
	if err := s.stream(ctx, []string{"/bin/sh", "-c", script, "sbx", inpod.Version + " " + helperHash()}, bin, io.Discard, &errb, nil); err != nil {
		if lost := s.lost(ctx, err, false); lost != nil {
			return lost
		}
		return fmt.Errorf("upload the helper into pod %s/%s: %v %s", s.ns, s.pod, err, strings.TrimSpace(errb.String()))
	}
	s.p.log.Debug("uploaded the in-pod helper", "pod", s.pod, "from", bin.Name(), "took", time.Since(start))
	return nil
}

// closeMux ends the long-lived exec, if any.
func (s *Sandbox) closeMux() {
	s.muxMu.Lock()
	m := s.mux
	s.mux = nil
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	s.muxMu.Unlock()
	if m != nil {
		m.Close()
	}
}

// execHelper runs cmd as one round trip through the in-pod helper.
func (s *Sandbox) execHelper(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	if s.relay != "" {
		return s.execRelay(ctx, cmd)
	}
	m, err := s.helperMux(ctx)
	if err != nil {
		if errors.Is(err, sandbox.ErrLost) {
			// Nothing ran: the engine may claim a new sandbox and run it there.
			return sandbox.Result{}, fmt.Errorf("%w: %v", sandbox.ErrUnreachable, err)
		}
		return sandbox.Result{}, err
	}
	stopRenew := s.renewWhile(ctx)
	defer stopRenew()
	res, err := inpod.Exec(ctx, m.Run, helperPath, cmd)
	if why := s.goneReason(); why != "" && ctx.Err() == nil {
		if err == nil {
			err = errors.New("the pod went away")
		}
		return res, lostError(why, err, true)
	}
	if err != nil && ctx.Err() == nil {
		if lost := s.lost(ctx, err, true); lost != nil {
			return res, lost
		}
	}
	return res, err
}

// boundedBuffer keeps the first 4 KiB written to it (a helper's stderr, for
// error messages) and drops the rest.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// execRelay runs cmd through the session's relay.
func (s *Sandbox) execRelay(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	res, err := inpod.Exec(ctx, inpod.RelayRun(s.relay), helperPath, cmd)
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	// The call broke: the relay says why when the sandbox is gone; else ask
	// the API, as a broken exec would.
	if why, serr := inpod.RelayStatus(s.relay, 2*time.Second); serr == nil && why != "" {
		return res, lostError(why, err, true)
	}
	if lost := s.lost(ctx, err, true); lost != nil {
		return res, lost
	}
	return res, err
}
