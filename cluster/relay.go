package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sbx-sh/sbx/inpod"
	"github.com/sbx-sh/sbx/sandbox"
)

// The relay: with Config.Relay (the sbx CLI sets it), a kept session's
// second process starts `sbx __cluster-relay STATEDIR` in the background. It
// attaches to the claim, starts the helper's mux and serves helper calls on
// <STATEDIR>/relay-<claim>.sock (package inpod), so later sbx processes of
// that session run each command as a socket round trip plus a stream,
// instead of a pods/exec of their own, and skip the API calls of an
// attach: the relay's pod watch answers whether the sandbox still serves.
// It renews the claim while calls come, and exits when the claim's TTL has
// passed without a call, when the pod is gone, or when the session's state
// says another claim or none (released).

const relayArg = "__cluster-relay"

// envRelayConfig carries the provider's Config to the relay process.
const envRelayConfig = "SBX_CLUSTER_RELAY_CONFIG"

// relayPath is the relay's socket for a claim, or "" when the path would be
// too long for a unix socket.
func relayPath(stateDir, claim string) string {
	p := filepath.Join(stateDir, "relay-"+claim+".sock")
	if stateDir == "" || len(p) > 100 {
		return ""
	}
	return p
}

// viaRelay returns the session's sandbox as served by a running relay, or
// nil when there is none that says the sandbox serves.
func (p *Provider) viaRelay(spec sandbox.Spec) *Sandbox {
	st, err := readState(spec.StateDir)
	if err != nil {
		return nil
	}
	path := relayPath(spec.StateDir, st.Claim)
	if path == "" {
		return nil
	}
	if why, err := inpod.RelayStatus(path, 2*time.Second); err != nil || why != "" {
		return nil
	}
	return &Sandbox{p: p, ns: st.Namespace, claim: st.Claim, uid: st.UID, pod: st.Pod, podUID: st.PodUID, container: st.Container,
		session: spec.Name, stateDir: spec.StateDir, ttl: p.ttl(spec), relay: path}
}

// startRelay starts a relay for sb in the background; this process goes on
// with its own exec of the helper, later ones use the relay.
func (p *Provider) startRelay(sb *Sandbox, spec sandbox.Spec) {
	if relayPath(spec.StateDir, sb.claim) == "" {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	cfg := p.cfg
	cfg.Relay = false
	raw, _ := json.Marshal(relayConfig{Config: cfg, Session: spec.Name, IdleTTL: spec.IdleTTL})
	logf, err := os.OpenFile(filepath.Join(spec.StateDir, "relay.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	defer logf.Close()
	cmd := exec.Command(exe, relayArg, spec.StateDir)
	cmd.Env = append(os.Environ(), envRelayConfig+"="+string(raw))
	cmd.Stderr = logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		p.log.Debug("start the session's relay", "err", err)
		return
	}
	cmd.Process.Release()
}

type relayConfig struct {
	Config  Config
	Session string
	IdleTTL time.Duration
}

// RelayMain runs the relay when this binary was started as one, and never
// returns in that case.
func RelayMain() {
	if len(os.Args) != 3 || os.Args[1] != relayArg {
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := runRelay(os.Args[2], log); err != nil {
		log.Error("relay", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRelay(stateDir string, log *slog.Logger) error {
	var rc relayConfig
	if err := json.Unmarshal([]byte(os.Getenv(envRelayConfig)), &rc); err != nil {
		return fmt.Errorf("%s: %w", envRelayConfig, err)
	}
	p := New(rc.Config, log)
	ctx := context.Background()
	spec := sandbox.Spec{Name: rc.Session, StateDir: stateDir, IdleTTL: rc.IdleTTL}
	sbi, err := p.Attach(ctx, spec)
	if err != nil {
		return err
	}
	s := sbi.(*Sandbox)
	if _, err := s.helperMux(ctx); err != nil {
		return err
	}
	path := relayPath(stateDir, s.claim)
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer ln.Close()
	var active atomic.Int32
	last := atomic.Int64{}
	last.Store(time.Now().UnixNano())
	go inpod.ServeRelay(ln, inpod.RelayHooks{
		Mux:  s.helperMux,
		Gone: s.goneReason,
		// As Exec does for a command of its own: renew at its start and
		// while it runs.
		Called: func() func() {
			active.Add(1)
			last.Store(time.Now().UnixNano())
			go s.Renew(ctx)
			stopRenew := s.renewWhile(ctx)
			return func() { stopRenew(); active.Add(-1); last.Store(time.Now().UnixNano()) }
		},
	})
	log.Info("relay serving", "claim", s.claim, "pod", s.pod, "socket", path)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for range tick.C {
		if why := s.goneReason(); why != "" {
			log.Info("relay ends: the sandbox is gone", "why", why)
			break
		}
		if st, err := readState(stateDir); err != nil || st.Claim != s.claim {
			log.Info("relay ends: the session no longer uses this claim")
			break
		}
		if active.Load() == 0 && time.Since(time.Unix(0, last.Load())) > s.ttl {
			log.Info("relay ends: idle", "for", s.ttl)
			break
		}
	}
	s.closeMux()
	return nil
}
