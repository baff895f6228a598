//go:build e2e

package clustere2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox"
)

func claim(t *testing.T, p *cluster.Provider, name string, spec ...sandbox.Spec) *cluster.Sandbox {
	t.Helper()
	s := sandbox.Spec{Name: name, StateDir: t.TempDir(), Progress: func(m string) { t.Log("progress:", m) }}
	if len(spec) > 0 {
		s = spec[0]
	}
	start := time.Now()
	sb, err := p.Claim(context.Background(), s)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Logf("claimed %s (pod %s) in %s", sb.(*cluster.Sandbox).Claim(), sb.(*cluster.Sandbox).Pod(), time.Since(start))
	t.Cleanup(func() { sb.Release(context.Background()) })
	return sb.(*cluster.Sandbox)
}

func run(t *testing.T, sb sandbox.Sandbox, c *sandbox.Cmd) (sandbox.Result, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if c.Stdout == nil {
		c.Stdout = &out
	}
	if c.Stderr == nil {
		c.Stderr = &errb
	}
	r, err := sb.Exec(context.Background(), c)
	if err != nil {
		t.Fatalf("exec %q: %v", c.Argv, err)
	}
	return r, out.String(), errb.String()
}

func TestClaimExecRelease(t *testing.T) {
	p := cluster.New(saCfg(t), nil)
	sb := claim(t, p, "exec-basics")

	r, out, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Env: []string{"PATH=/bin"}})
	if r.ExitCode != 3 || out != "out\n" || errs != "err\n" {
		t.Errorf("exit %d stdout %q stderr %q", r.ExitCode, out, errs)
	}
	// stdin, env, dir, fd 3
	var fd3 bytes.Buffer
	r, out, _ = run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", `cat; echo "$A"; env | wc -l; cd /cache; pwd >&3`},
		Env: []string{"PATH=/bin", "A=from env"}, Dir: "/tmp", Stdin: strings.NewReader("from stdin\n"), Fd3: &fd3})
	if r.ExitCode != 0 || !strings.HasPrefix(out, "from stdin\nfrom env\n") || strings.TrimSpace(fd3.String()) != "/cache" {
		t.Errorf("exit %d stdout %q fd3 %q", r.ExitCode, out, fd3.String())
	}
	// exactly the given environment (plus SBX_EXEC_ID and what sh itself sets)
	_, out, _ = run(t, sb, &sandbox.Cmd{Argv: []string{"env"}, Env: []string{"PATH=/bin", "X=1"}})
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "PATH=") && l != "X=1" && !strings.HasPrefix(l, "SBX_EXEC_ID=") {
			t.Errorf("unexpected env var in the sandbox: %q", l)
		}
	}
	// one writer for both: order preserved
	var both bytes.Buffer
	run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "echo 1; echo 2 >&2; echo 3; echo 4 >&2"}, Stdout: &both, Stderr: &both})
	if both.String() != "1\n2\n3\n4\n" {
		t.Errorf("interleaved = %q", both.String())
	}
	// non-root, no service account token, the tenant cache is writable
	_, out, _ = run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "id -u; ls /var/run/secrets/kubernetes.io 2>&1; touch /cache/x && echo cache-ok"}})
	if !strings.HasPrefix(out, "1000\n") || !strings.Contains(out, "No such file") || !strings.Contains(out, "cache-ok") {
		t.Errorf("pod hardening: %q", out)
	}
	// a command that is not there
	r, _, errs = run(t, sb, &sandbox.Cmd{Argv: []string{"no-such-command"}, Env: []string{"PATH=/bin"}})
	if r.ExitCode != 127 {
		t.Errorf("missing command: exit %d (%s)", r.ExitCode, errs)
	}
	name := sb.Claim()
	if err := sb.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sb.Release(context.Background()); err != nil {
		t.Errorf("second release: %v", err)
	}
	claimGone(t, name, 30*time.Second)
	if _, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrLost) {
		t.Errorf("exec after release: %v", err)
	}
}

// psSleeps lists the sleep processes in the pod.
func psSleeps(t *testing.T, sb sandbox.Sandbox) string {
	_, out, _ := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "ps -o pid,args | grep 'sleep 3[01][0-9]' | grep -v grep || true"}})
	return strings.TrimSpace(out)
}

func TestTimeoutKillsTree(t *testing.T) {
	p := cluster.New(saCfg(t), nil)
	sb := claim(t, p, "timeout")
	start := time.Now()
	// The children run (ps shows them) when the timeout strikes.
	r, out, _ := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "sleep 301 & (setsid sleep 302 &); " +
		"until [ $(ps -o args | grep -c '^sleep 30[12]$') -ge 2 ]; do sleep 0.1; done; echo started; sleep 303; echo not-reached"}, Timeout: 5 * time.Second})
	if !r.TimedOut || r.ExitCode != sandbox.TimeoutExitCode || time.Since(start) > 20*time.Second {
		t.Errorf("result %+v after %s", r, time.Since(start))
	}
	if out != "started\n" {
		t.Errorf("the children did not start before the timeout: output %q", out)
	}
	if left := psSleeps(t, sb); left != "" {
		t.Errorf("processes survived the timeout:\n%s", left)
	}
	// cancellation kills too: cancelled once the command runs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"sh", "-c", "sleep 304 & echo started; sleep 305"}, Stdout: &testenv.CancelOn{Word: "started", Cancel: cancel}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled exec: %v", err)
	}
	left := ""
	if !testenv.WaitEvery(20*time.Second, 200*time.Millisecond, func() bool { left = psSleeps(t, sb); return left == "" }) {
		t.Errorf("processes survived the cancellation by 20s:\n%s", left)
	}
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func shutdownTime(t *testing.T, claim string) time.Time {
	s, _, _ := unstructured.NestedString(getClaim(t, claim).Object, "spec", "lifecycle", "shutdownTime")
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("shutdownTime %q: %v", s, err)
	}
	return v
}

func TestRenewMovesShutdownTime(t *testing.T) {
	cfg := saCfg(t)
	cfg.IdleTTL = 16 * time.Second
	p := cluster.New(cfg, nil)
	sb := claim(t, p, "renew")
	first := shutdownTime(t, sb.Claim())
	// A call renews once less than half of the TTL is left (and not more
	// often than renewMinInterval): wait for that point of the clock.
	if !testenv.WaitEvery(cfg.IdleTTL, 200*time.Millisecond, func() bool { return time.Until(first) < cfg.IdleTTL/2-time.Second }) {
		t.Fatalf("shutdownTime %s is not within half the TTL after %s", first, cfg.IdleTTL)
	}
	run(t, sb, &sandbox.Cmd{Argv: []string{"true"}})
	second := shutdownTime(t, sb.Claim())
	if !second.After(first.Add(5 * time.Second)) {
		t.Errorf("shutdownTime %s -> %s: not pushed forward", first, second)
	}
	// a command that runs longer than the TTL keeps the sandbox alive
	r, _, _ := run(t, sb, &sandbox.Cmd{Argv: []string{"sleep", "20"}})
	if r.ExitCode != 0 {
		t.Errorf("long command: %+v", r)
	}
	run(t, sb, &sandbox.Cmd{Argv: []string{"true"}})
}

func TestExpiryByShutdownTime(t *testing.T) {
	cfg := saCfg(t)
	cfg.IdleTTL = 4 * time.Second
	p := cluster.New(cfg, nil)
	dir := t.TempDir()
	sb := claim(t, p, "expiry", sandbox.Spec{Name: "expiry", StateDir: dir})
	claimGone(t, sb.Claim(), 40*time.Second)
	_, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}})
	if !errors.Is(err, sandbox.ErrLost) {
		t.Errorf("exec after expiry: %v", err)
	}
	var stale *sandbox.StaleError
	if _, err := p.Attach(context.Background(), sandbox.Spec{Name: "expiry", StateDir: dir}); !errors.As(err, &stale) {
		t.Errorf("attach after expiry: %v", err)
	} else {
		t.Logf("attach after expiry: %v", err)
	}
}

func TestPersistentReattach(t *testing.T) {
	cfg := saCfg(t)
	cfg.Persistent = true
	p1 := cluster.New(cfg, nil)
	sb1 := claim(t, p1, "persist/a long key with spaces that is not a label value, so it is hashed")
	run(t, sb1, &sandbox.Cmd{Argv: []string{"sh", "-c", "echo kept > /tmp/state"}})
	// a restarted sbx-mcp: a new provider, a new state dir
	p2 := cluster.New(cfg, nil)
	start := time.Now()
	sb2, err := p2.Claim(context.Background(), sandbox.Spec{Name: "persist/a long key with spaces that is not a label value, so it is hashed", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("re-attached in %s", time.Since(start))
	if sb2.(*cluster.Sandbox).Claim() != sb1.Claim() {
		t.Errorf("new claim %s, want the existing %s", sb2.(*cluster.Sandbox).Claim(), sb1.Claim())
	}
	_, out, _ := run(t, sb2, &sandbox.Cmd{Argv: []string{"cat", "/tmp/state"}})
	if out != "kept\n" {
		t.Errorf("state lost: %q", out)
	}
	infos, err := p2.List(context.Background())
	if err != nil || len(infos) != 1 || !infos[0].Persistent {
		t.Errorf("list: %+v %v", infos, err)
	}
	names, err := p2.ReleaseSession(context.Background(), "persist/a long key with spaces that is not a label value, so it is hashed")
	if err != nil || len(names) != 1 {
		t.Fatalf("release by label: %v %v", names, err)
	}
	claimGone(t, names[0], 30*time.Second)
	// release --all
	claim(t, p2, "all-1")
	claim(t, p2, "all-2")
	names, err = p2.ReleaseAll(context.Background())
	if err != nil || len(names) != 2 {
		t.Errorf("release all: %v %v", names, err)
	}
}

func TestPodDeletedMidSession(t *testing.T) {
	p := cluster.New(saCfg(t), nil)
	dir := t.TempDir()
	sb := claim(t, p, "lost", sandbox.Spec{Name: "lost", StateDir: dir})
	run(t, sb, &sandbox.Cmd{Argv: []string{"true"}}) // the helper is up: what follows is a command in flight
	pod, err := admin.CoreV1().Pods(ns).Get(context.Background(), sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The pod goes once the command runs (it says so).
	running := make(chan struct{})
	deleted := make(chan error, 1)
	go func() {
		select {
		case <-running:
		case <-time.After(60 * time.Second):
			deleted <- errors.New("the command did not start within 60s")
			return
		}
		zero := int64(0)
		deleted <- admin.CoreV1().Pods(ns).Delete(context.Background(), sb.Pod(), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	var once sync.Once
	_, err = sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"sh", "-c", "echo started; exec sleep 30"},
		Stdout: writerFunc(func(p []byte) (int, error) { once.Do(func() { close(running) }); return len(p), nil })})
	if derr := <-deleted; derr != nil {
		t.Fatalf("delete the pod: %v", derr)
	}
	if !errors.Is(err, sandbox.ErrLost) || !strings.Contains(err.Error(), "lost") {
		t.Errorf("exec while the pod is deleted: %v", err)
	} else {
		t.Logf("in-flight: %v", err)
	}
	// Wait for the pod to be gone, then the next call notices before
	// running. agent-sandbox v0.5.6's Sandbox controller makes a new pod of
	// the same name at once: the one deleted is gone when its UID is; the
	// new one is a fresh sandbox, not this session's.
	if !testenv.WaitEvery(30*time.Second, 200*time.Millisecond, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(context.Background(), sb.Pod(), metav1.GetOptions{})
		return err != nil || p.UID != pod.UID
	}) {
		t.Fatalf("pod %s (uid %s) still there 30s after its deletion", sb.Pod(), pod.UID)
	}
	_, err = sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}})
	if !errors.Is(err, sandbox.ErrLost) {
		t.Errorf("exec after the pod is gone: %v", err)
	} else {
		t.Logf("next call: %v", err)
	}
	var stale *sandbox.StaleError
	if _, err := p.Attach(context.Background(), sandbox.Spec{Name: "lost", StateDir: dir}); !errors.As(err, &stale) {
		t.Errorf("attach: %v", err)
	} else {
		t.Logf("attach: %v", err)
	}
	// a new claim works
	sb2 := claim(t, p, "lost-again", sandbox.Spec{Name: "lost", StateDir: dir})
	run(t, sb2, &sandbox.Cmd{Argv: []string{"true"}})
}

func TestClaimTimeoutEmptyPool(t *testing.T) {
	cfg := saCfg(t)
	cfg.Pool = emptyPool
	cfg.ClaimTimeout = 6 * time.Second
	p := cluster.New(cfg, nil)
	_, err := p.Claim(context.Background(), sandbox.Spec{Name: "timeout", StateDir: t.TempDir()})
	var te *cluster.ClaimTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("want a ClaimTimeoutError, got %v", err)
	}
	t.Logf("message: %v", err)
	for _, s := range []string{`pool "sbx-empty"`, `namespace "sbx"`, "0 of 0 sandboxes ready", "conditions:", "deleted it"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message lacks %q", s)
		}
	}
	claimGone(t, te.Claim, 30*time.Second)
}

func TestRBACLeastPrivilege(t *testing.T) {
	// everything sbx needs is granted in its namespace; the gVisor check
	// says whether the pool's pods run under gVisor: not in the runc pass
	gvisor := os.Getenv("SBX_E2E_RUNTIME_CLASS") == "gvisor"
	for _, c := range cluster.Doctor(context.Background(), saCfg(t)) {
		if strings.Contains(c.Name, "gVisor") && !gvisor {
			if c.OK {
				t.Errorf("doctor: %s: OK on a pool under runc: %s", c.Name, c.Detail)
			} else {
				t.Logf("doctor (runc pass): %s: %s", c.Name, c.Detail)
			}
			continue
		}
		if !c.OK {
			t.Errorf("doctor: %s: %s (fix: %s)", c.Name, c.Detail, c.Fix)
		}
		if c.Name == "in-pod helper" && !strings.Contains(c.Detail, "preinstalled by template "+poolName+"'s init container sbx-helper from image "+helperImage) {
			t.Errorf("doctor: %s: %s; want the e2e pool's preinstall from %s named", c.Name, c.Detail, helperImage)
		}
	}
	// and nothing in another namespace: the error names the verb and resource
	cfg := saCfg(t)
	cfg.Namespace = "default"
	_, err := cluster.New(cfg, nil).Claim(context.Background(), sandbox.Spec{Name: "x", StateDir: t.TempDir()})
	var fe *cluster.ForbiddenError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "RBAC forbids get on sandboxwarmpools.extensions.agents.x-k8s.io") {
		t.Errorf("claim in another namespace: %v", err)
	} else {
		t.Logf("message: %v", err)
	}
	failed := 0
	for _, c := range cluster.Doctor(context.Background(), cfg) {
		if !c.OK {
			failed++
		}
	}
	if failed == 0 {
		t.Error("doctor found no problem in a namespace without the Role")
	}
	// the service account cannot touch anything beyond its Role
	p := cluster.New(saCfg(t), nil)
	sb := claim(t, p, "rbac")
	run(t, sb, &sandbox.Cmd{Argv: []string{"true"}})
}

func TestUnreachableAndBadKubeconfig(t *testing.T) {
	cfg := saCfg(t)
	cfg.Kubeconfig = "/nonexistent/kubeconfig"
	_, err := cluster.New(cfg, nil).Claim(context.Background(), sandbox.Spec{Name: "x"})
	var ke *cluster.KubeconfigError
	if !errors.As(err, &ke) {
		t.Errorf("bad kubeconfig: %v", err)
	}
	checks := cluster.Doctor(context.Background(), cfg)
	if len(checks) != 1 || checks[0].OK || checks[0].Fix == "" {
		t.Errorf("doctor with a bad kubeconfig: %+v", checks)
	}
}

func TestTTY(t *testing.T) {
	p := cluster.New(saCfg(t), nil)
	sb := claim(t, p, "tty")
	resize := make(chan sandbox.WindowSize, 1)
	resize <- sandbox.WindowSize{Rows: 40, Cols: 120}
	var out bytes.Buffer
	stdin, w := io.Pipe() // a terminal's input does not end
	defer w.Close()
	r, err := sb.Exec(context.Background(), &sandbox.Cmd{
		Argv: []string{"sh", "-c", "stty size; sleep 1; stty size; [ -t 0 ] && echo is-a-tty"}, Env: []string{"PATH=/bin", "TERM=xterm"},
		Stdin: stdin, Stdout: &out, TTY: &sandbox.TTY{Size: sandbox.WindowSize{Rows: 30, Cols: 100}, Resize: resize},
	})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("tty exec: %v %+v %q", err, r, out.String())
	}
	got := strings.ReplaceAll(out.String(), "\r", "")
	if !strings.Contains(got, "is-a-tty") || (!strings.Contains(got, "30 100") && !strings.Contains(got, "40 120")) {
		t.Errorf("tty output %q", got)
	}
}
