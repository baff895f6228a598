package cluster

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/sandbox"
)

// The sync runs through the in-pod helper (package inpod): sbx itself,
// uploaded into the pod once per claim (or found there already at the right
// version), so that each command is one exec carrying the host's changes in
// and the sandbox's out. The helper must be a static Linux binary of the
// pod's architecture: sbx built with CGO_ENABLED=0, or the file named by
// SBX_INPOD_HELPER.

// EnvHelper names a static sbx binary to upload when the running one is not.
const EnvHelper = "SBX_INPOD_HELPER"

// helperPath is where the helper lives in the pod.
const helperPath = "/tmp/.sbx/sbx"

// helperBinary opens the binary to upload.
func helperBinary() (*os.File, error) {
	if p := os.Getenv(EnvHelper); p != "" {
		return os.Open(p)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("this sbx is built for %s; the pod needs a Linux one: set %s to a static sbx for linux/%s (CGO_ENABLED=0 GOOS=linux go build ./cmd/sbx)", runtime.GOOS, EnvHelper, runtime.GOARCH)
	}
	f, err := elf.Open(exe)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", exe, err)
	}
	static := true
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			static = false
		}
	}
	f.Close()
	if !static {
		return nil, fmt.Errorf("%s is dynamically linked and cannot run in the pod: build sbx with CGO_ENABLED=0, or set %s to a static sbx", exe, EnvHelper)
	}
	return os.Open(exe)
}

// ensureHelper uploads the helper unless the pod already has this version.
func (s *Sandbox) ensureHelper(ctx context.Context) error {
	s.mu.Lock()
	ready := s.helperReady
	s.mu.Unlock()
	if ready {
		return nil
	}
	var out bytes.Buffer
	if err := s.stream(ctx, []string{helperPath, "__inpod", "version"}, nil, &out, io.Discard, nil); err != nil || strings.TrimSpace(out.String()) != inpod.Version {
		bin, err := helperBinary()
		if err != nil {
			return fmt.Errorf("the cluster backend's helper: %w", err)
		}
		defer bin.Close()
		start := time.Now()
		script := `set -e; mkdir -p /tmp/.sbx; chmod 700 /tmp/.sbx; cat > /tmp/.sbx/sbx.new; chmod 755 /tmp/.sbx/sbx.new; mv /tmp/.sbx/sbx.new ` + helperPath
		var errb bytes.Buffer
		if err := s.stream(ctx, []string{"/bin/sh", "-c", script}, bin, io.Discard, &errb, nil); err != nil {
			return fmt.Errorf("upload the helper into pod %s/%s: %v %s", s.ns, s.pod, err, strings.TrimSpace(errb.String()))
		}
		out.Reset()
		if err := s.stream(ctx, []string{helperPath, "__inpod", "version"}, nil, &out, &errb, nil); err != nil || strings.TrimSpace(out.String()) != inpod.Version {
			return fmt.Errorf("the uploaded helper does not run in pod %s/%s (wrong architecture?): %v %s", s.ns, s.pod, err, strings.TrimSpace(errb.String()))
		}
		s.p.log.Debug("uploaded the in-pod helper", "pod", s.pod, "took", time.Since(start))
	}
	s.mu.Lock()
	s.helperReady = true
	s.mu.Unlock()
	return nil
}

// execHelper runs cmd as one round trip through the in-pod helper.
func (s *Sandbox) execHelper(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	if err := s.ensureHelper(ctx); err != nil {
		if lost := s.lost(ctx, err, false); lost != nil {
			// Nothing ran: the engine may claim a new sandbox and run it there.
			return sandbox.Result{}, fmt.Errorf("%w: %v", sandbox.ErrUnreachable, lost)
		}
		return sandbox.Result{}, err
	}
	stopRenew := s.renewWhile(ctx)
	defer stopRenew()
	run := func(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
		return s.stream(ctx, argv, stdin, stdout, io.Discard, nil)
	}
	res, err := inpod.Exec(ctx, run, helperPath, cmd)
	if err != nil && ctx.Err() == nil {
		if lost := s.lost(ctx, err, true); lost != nil {
			return res, lost
		}
	}
	return res, err
}
