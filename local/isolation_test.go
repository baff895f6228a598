//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox"
)

func marker(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:])
	return "sbx-test-" + hex.EncodeToString(b[:])
}

func TestRunsAsNonRootWithoutCapabilities(t *testing.T) {
	sb, _ := claim(t, nil)
	out, res := run(t, sb, "id -u; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, out)
	}
	for _, want := range []string{"1000\n", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestInitHasEmptyBoundingSet(t *testing.T) {
	_, work := claim(t, nil)
	// This sandbox's init, by the pid its state records (others' inits may
	// come and go on the machine meanwhile).
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(work), stateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(raw, &st); err != nil || st.Pid <= 0 {
		t.Fatalf("no init pid in %s: %v", raw, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.Pid))
	if err != nil || !strings.HasPrefix(string(cmdline), "sbx-init\x00") {
		t.Fatalf("pid %d is not the sandbox init: %q %v", st.Pid, cmdline, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", st.Pid))
	if err != nil {
		t.Fatalf("the running sandbox's init: %v", err)
	}
	for _, want := range []string{"CapBnd:\t0000000000000000", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("init %d: missing %q in:\n%s", st.Pid, want, status)
		}
	}
}

func TestCommandSeesOnlyItsOwnProcessesAndDescriptors(t *testing.T) {
	sb, _ := claim(t, nil)
	out, res := run(t, sb, "ls /proc | grep -E '^[0-9]+$' | wc -l; ls /proc/self/fd; cat /proc/1/cmdline | tr '\\0' ' '")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// pid 1 (the worker), sh, ls, grep, wc: a handful, never the init.
	if strings.Contains(out, "sbx-init") {
		t.Errorf("the sandbox init is visible to a command:\n%s", out)
	}
	for _, l := range lines[1 : len(lines)-1] {
		switch strings.TrimSpace(l) {
		case "0", "1", "2", "3":
		default:
			t.Errorf("command has an unexpected open descriptor %q:\n%s", l, out)
		}
	}
}

func TestHomeFileNotReadable(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(home, "."+marker(t))
	if err := os.WriteFile(secret, []byte("top secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(secret)
	sb, _ := claim(t, nil)
	out, res := run(t, sb, "cat "+secret+"; ls -a "+home+" 2>&1; test -e "+secret+" && echo EXISTS; grep -rs 'top secret' /etc /home /tmp /run -l | head -3")
	if strings.Contains(out, "top secret") || strings.Contains(out, "EXISTS") || strings.Contains(out, filepath.Base(secret)+"\n") {
		t.Fatalf("host home file visible in the sandbox (exit %d):\n%s", res.ExitCode, out)
	}
}

func TestSystemDirsReadOnly(t *testing.T) {
	probe := "/usr/" + marker(t)
	defer os.Remove(probe)
	sb, _ := claim(t, nil)
	for _, script := range []string{
		"touch " + probe,
		"echo x >> /usr/bin/true",
		"echo x >> /etc/hosts",
		"mkdir /newdir",
		"mount -o remount,rw /usr",
		"chmod 777 /usr/bin",
	} {
		out, res := run(t, sb, script)
		if res.ExitCode == 0 {
			t.Errorf("%q succeeded in the sandbox:\n%s", script, out)
		}
	}
	if _, err := os.Stat(probe); err == nil {
		t.Fatalf("sandbox created %s on the host", probe)
	}
	// The writable places are the private ones.
	out, res := run(t, sb, "touch /tmp/a /home/sbx/a /srv/code/a /dev/shm/a && echo ok")
	if res.ExitCode != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("private dirs not writable: %s", out)
	}
}

func TestHostProcessesInvisible(t *testing.T) {
	m := marker(t)
	host := exec.Command("/bin/sh", "-c", "exec -a "+m+" sleep 60")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	sb, _ := claim(t, nil)
	out, res := run(t, sb, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, out)
	}
	if strings.Contains(out, m) {
		t.Fatalf("host process %s visible in the sandbox:\n%s", m, out)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", host.Process.Pid)); err != nil {
		t.Fatalf("host process not running: %v", err)
	}
}

// listen starts a host listener on 127.0.0.1 and reports whether anything
// connected to it.
func listen(t *testing.T) (port int, connected func() bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() bool {
		select {
		case <-got:
			return true
		case <-time.After(500 * time.Millisecond):
			return false
		}
	}
}

func TestNetworkOffByDefault(t *testing.T) {
	port, connected := listen(t)
	sb, _ := claim(t, nil)
	out, res := run(t, sb, fmt.Sprintf("bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo CONNECTED", port))
	if res.ExitCode == 0 || strings.Contains(out, "CONNECTED") || connected() {
		t.Fatalf("sandbox without network reached host 127.0.0.1:%d (exit %d):\n%s", port, res.ExitCode, out)
	}
	// Its own loopback works.
	out, res = run(t, sb, "ip -o link show lo 2>/dev/null || cat /sys/class/net/lo/operstate 2>/dev/null; bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' 2>&1 | grep -c refused")
	if !strings.Contains(out, "1") {
		t.Errorf("loopback inside the sandbox is not up (want connection refused, not unreachable):\n%s", out)
	}
}

func TestNetworkHostWhenAsked(t *testing.T) {
	port, connected := listen(t)
	sb, _ := claim(t, func(s *sandbox.Spec) { s.Network = sandbox.NetworkHost })
	out, res := run(t, sb, fmt.Sprintf("bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo CONNECTED", port))
	if res.ExitCode != 0 || !strings.Contains(out, "CONNECTED") || !connected() {
		t.Fatalf("sandbox with host network could not reach 127.0.0.1:%d (exit %d):\n%s", port, res.ExitCode, out)
	}
}

func TestEnvironmentIsOnlyWhatIsGiven(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "AKIAFAKESECRET")
	sb, _ := claim(t, nil)
	out, _ := run(t, sb, "env; cat /proc/1/environ | tr '\\0' '\\n'")
	if strings.Contains(out, "AKIAFAKESECRET") {
		t.Fatalf("host environment leaked into the sandbox:\n%s", out)
	}
}

func TestTimeoutKillsWholeTree(t *testing.T) {
	m := marker(t)
	sb, _ := claim(t, nil)
	var out bytes.Buffer
	start := time.Now()
	res, err := sb.Exec(context.Background(), &sandbox.Cmd{
		Argv: []string{"/bin/sh", "-c", "setsid bash -c 'exec -a " + m + "-a sleep 300' >/dev/null 2>&1 & bash -c 'exec -a " + m + "-b sleep 300' >/dev/null 2>&1 & " +
			"until ps -eo args | grep -q '^" + m + "-a' && ps -eo args | grep -q '^" + m + "-b'; do sleep 0.01; done; ps -eo pid,args >&2; wait"},
		Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &out, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != sandbox.TimeoutExitCode {
		t.Fatalf("want timed out with exit 124, got %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timeout took %s", d)
	}
	if !strings.Contains(out.String(), m+"-a") || !strings.Contains(out.String(), m+"-b") {
		t.Fatalf("the command's children did not start:\n%s", out.String())
	}
	if procs := testenv.HostProcs(m); len(procs) > 0 {
		t.Fatalf("processes survived the timeout: %v", procs)
	}
}

func TestExitCodesPassThrough(t *testing.T) {
	sb, _ := claim(t, nil)
	for _, c := range []struct {
		script string
		code   int
	}{{"exit 0", 0}, {"exit 3", 3}, {"exit 255", 255}, {"kill -9 $$", 137}, {"no-such-program-xyz", 127}} {
		_, res := run(t, sb, c.script)
		if res.ExitCode != c.code {
			t.Errorf("%q: exit %d, want %d", c.script, res.ExitCode, c.code)
		}
	}
	res, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"no-such-program-xyz"}, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil || res.ExitCode != 127 {
		t.Errorf("missing program: %+v %v, want exit 127", res, err)
	}
}

func TestStdinClosedUnlessGiven(t *testing.T) {
	sb, _ := claim(t, nil)
	out, res := run(t, sb, "cat; echo done")
	if res.ExitCode != 0 || strings.TrimSpace(out) != "done" {
		t.Fatalf("reading a closed stdin: exit %d %q", res.ExitCode, out)
	}
	var o bytes.Buffer
	if _, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"/bin/cat"}, Stdin: strings.NewReader("fed"), Stdout: &o}); err != nil || o.String() != "fed" {
		t.Fatalf("stdin: %q %v", o.String(), err)
	}
}

func TestReleaseKillsEverything(t *testing.T) {
	m := marker(t)
	state := shortTempDir(t)
	p := &Provider{Version: "test"}
	sb, err := p.Claim(context.Background(), sandbox.Spec{Name: "r", StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"/bin/sh", "-c", "setsid bash -c 'exec -a " + m + " sleep 300' & exec bash -c 'exec -a " + m + " sleep 300'"}, Env: []string{"PATH=/usr/bin:/bin"}})
		done <- err
	}()
	for i := 0; len(testenv.HostProcs(m)) < 2; i++ {
		if i > 500 {
			t.Fatal("commands did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("exec of a released sandbox returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exec did not return after release")
	}
	if procs := testenv.HostProcs(m); len(procs) > 0 {
		var st []string
		for _, p := range procs {
			raw, _ := os.ReadFile(filepath.Join(filepath.Dir(strings.SplitN(p, ":", 2)[0]), "status"))
			for _, l := range strings.Split(string(raw), "\n") {
				if strings.HasPrefix(l, "State") || strings.HasPrefix(l, "PPid") || strings.HasPrefix(l, "NSpid") {
					st = append(st, l)
				}
			}
		}
		t.Fatalf("processes survived release: %v (%v)", procs, st)
	}
	if _, err := os.Stat(filepath.Join(state, "init.sock")); err == nil {
		t.Error("socket left after release")
	}
	if _, err := p.Attach(context.Background(), sandbox.Spec{Name: "r", StateDir: state}); err != sandbox.ErrNotFound {
		t.Errorf("attach after release: %v, want ErrNotFound", err)
	}
}

func TestLimits(t *testing.T) {
	// config.MinPids: the limit counts the init's and the worker's threads.
	sb, _ := claim(t, func(s *sandbox.Spec) { s.Limits = sandbox.Limits{MemoryBytes: 64 << 20, Pids: 64} })
	out, res := run(t, sb, "head -c 300000000 /dev/zero | tail -n 1 >/dev/null; echo rc=$?")
	if strings.Contains(out, "rc=0") {
		t.Errorf("a 300 MB allocation succeeded under a 64 MiB limit: %s", out)
	}
	out, res = run(t, sb, "for i in $(seq 100); do sleep 3 & done 2>&1; wait; echo end")
	t.Logf("pids: %s", out)
	if !strings.Contains(strings.ToLower(out), "fork") && !strings.Contains(out, "Resource temporarily unavailable") {
		t.Errorf("100 processes started under a limit of 64 (exit %d): %s", res.ExitCode, out)
	}
}

func TestConcurrentCommandsInOneSandbox(t *testing.T) {
	sb, _ := claim(t, nil)
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func(i int) {
			var out bytes.Buffer
			res, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"/bin/sh", "-c", fmt.Sprintf("sleep 0.2; echo %d", i)}, Stdout: &out, Env: []string{"PATH=/usr/bin:/bin"}})
			if err == nil && (res.ExitCode != 0 || strings.TrimSpace(out.String()) != fmt.Sprint(i)) {
				err = fmt.Errorf("command %d: exit %d out %q", i, res.ExitCode, out.String())
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
