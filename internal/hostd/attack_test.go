package hostd_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/hostd"
	"github.com/sbx-sh/sbx/internal/testenv"
)

// Attacks on the host daemon from where a sandboxed command, or a careless
// caller, stands. Each held when written; they stay as regressions.

// probeScript looks for a session's daemon the ways a process can: the
// socket's path and its state dir, the kernel's list of unix sockets (which
// names the path when the network namespace is the host's), a search of
// every file system, and a connect (curl --unix-socket) to each path found.
// curl exits 7 only when it could not connect; the daemon answers curl's
// "GET " as a frame over its bound, which is another exit.
func probeScript(stateDir string) string {
	sock := hostd.SocketPath(stateDir)
	return fmt.Sprintf(`s=%q; d=%q
[ -e "$s" ] && echo SOCK-VISIBLE
[ -e "$d" ] && echo DIR-VISIBLE
grep -q 'hostd\.sock' /proc/net/unix && echo LISTED
find / \( -path /proc -o -path /sys \) -prune -o -type s -name hostd.sock -print 2>/dev/null | grep -q . && echo FOUND
for p in "$s" $(grep -o '/[^ ]*hostd\.sock' /proc/net/unix) $(find / \( -path /proc -o -path /sys \) -prune -o -type s -name hostd.sock -print 2>/dev/null); do
	curl -s -m 5 --unix-socket "$p" http://daemon/ -o /dev/null; [ $? -ne 7 ] && echo "CONNECTED $p"
done
echo probed`, sock, stateDir)
}

// TestSandboxCannotReachDaemon: the daemon's socket sits in the session's
// state dir, which no mount of the sandbox shows, with its own network
// namespace and with the host's (--net, where /proc/net/unix lists the
// socket's path: a path socket still needs the path). The same probe run on
// the host finds and reaches it, so the probe can see what it looks for.
func TestSandboxCannotReachDaemon(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("this test needs curl (apt-get install curl): the probe connects with curl --unix-socket")
	}
	for _, network := range []string{"none", "host"} {
		t.Run(network, func(t *testing.T) {
			w := newWorld(t)
			w.env = append(w.env, "SBX_NETWORK="+network)
			w.exec(t, false, "true")
			w.waitDaemon(t, 0)
			probe := probeScript(w.sessionDir("hd"))

			// The control: on the host the probe sees the daemon.
			host, err := exec.Command("bash", "-c", probe).CombinedOutput()
			if err != nil {
				t.Fatalf("the probe on the host: %v\n%s", err, host)
			}
			for _, want := range []string{"SOCK-VISIBLE", "DIR-VISIBLE", "LISTED", "FOUND", "CONNECTED"} {
				if !strings.Contains(string(host), want) {
					t.Fatalf("the probe run on the host did not report %s (it cannot see what it looks for):\n%s", want, host)
				}
			}

			r := w.exec(t, true, probe)
			got := strings.Fields(r.stdout)
			allowed := []string{"probed"}
			if network == "host" {
				allowed = append(allowed, "LISTED") // the name, not the path
			}
			for _, g := range got {
				if !slices.Contains(allowed, g) {
					t.Errorf("a sandboxed command (network %s) reached the daemon: %q\n%s", network, r.stdout, r.stderr)
					break
				}
			}
			if !strings.HasSuffix(r.stdout, "probed\n") {
				t.Fatalf("the probe did not finish in the sandbox: %q\n%s", r.stdout, r.stderr)
			}
		})
	}
}

// TestDaemonLogsNoSecrets: a call's environment (tokens a user exports)
// travels to the daemon in the request and becomes the command's; neither
// the daemon's log nor its state dir keeps a value of it, debug level on.
func TestDaemonLogsNoSecrets(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	w.waitDaemon(t, 0)
	b := make([]byte, 16)
	rand.Read(b)
	secret := "tok" + hex.EncodeToString(b)
	w.env = append(w.env, "R_API_TOKEN="+secret)
	r := w.sbx(t, "exec", "--keep", "--session", "hd", "--", "echo ran")
	if r.code != 0 || r.stdout != "ran\n" || !strings.Contains(r.stderr, viaDaemon) {
		t.Fatalf("exec through the daemon: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, secret) {
		t.Fatalf("sbx exec's own log shows the token:\n%s", r.stderr)
	}
	filepath.Walk(w.sessionDir("hd"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if raw, _ := os.ReadFile(p); bytes.Contains(raw, []byte(secret)) {
			t.Errorf("%s holds the caller's token", p)
		}
		return nil
	})
}

// TestConcurrentFirstExecsOneDaemon: first kept execs of one session at
// once each find no daemon and start one: exactly one serves (the state
// dir's lock), the others end, and every command ran exactly once.
func TestConcurrentFirstExecsOneDaemon(t *testing.T) {
	w := newWorld(t)
	const n = 4
	var wg sync.WaitGroup
	res := make([]result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = w.sbx(t, "exec", "--keep", "--session", "hd", "--", fmt.Sprintf("echo run%d >> runs.txt; echo ran%d", i, i))
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 || r.stdout != fmt.Sprintf("ran%d\n", i) {
			t.Fatalf("exec %d: exit %d %q\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
	w.waitDaemon(t, 0)
	logPath := filepath.Join(w.sessionDir("hd"), "hostd.log")
	// Every daemon started has said whether it serves before the calls
	// below could start one more; wait until none but the server runs.
	if !testenv.WaitFor(30*time.Second, func() bool { return len(w.daemonPids()) == 1 }) {
		t.Fatalf("daemons of the session: %v", w.daemonPids())
	}
	w.exec(t, true, "echo later >> runs.txt")
	log, _ := os.ReadFile(logPath)
	if k := strings.Count(string(log), `msg="host daemon serving"`); k != 1 {
		t.Fatalf("%d daemons served the session, want 1; the log:\n%s", k, log)
	}
	raw, _ := os.ReadFile(filepath.Join(w.code, "runs.txt"))
	lines := strings.Fields(string(raw))
	slices.Sort(lines)
	want := []string{"later"}
	for i := range n {
		want = append(want, fmt.Sprintf("run%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("runs.txt on the host: %q, want each command once: %q", raw, want)
	}
}

// TestDaemonLogBounded: a daemon serves as long as commands come, and each
// may add a line to its log that the sandbox chooses to cause (a refused
// cwd report here; every round trip at debug level): past its bound
// (1 MiB) the log starts anew while the daemon runs, not only when the
// next daemon starts.
func TestDaemonLogBounded(t *testing.T) {
	const bound = 1 << 20
	w := newWorld(t)
	w.exec(t, false, "true")
	pid := w.waitDaemon(t, 0)
	// The next daemon finds a log just under its bound, which it keeps.
	syscall.Kill(pid, syscall.SIGKILL)
	if !testenv.WaitFor(10*time.Second, func() bool { return len(w.daemonPids()) == 0 }) {
		t.Fatalf("the killed daemon is still there: %v", w.daemonPids())
	}
	logPath := filepath.Join(w.sessionDir("hd"), "hostd.log")
	filler := bytes.Repeat([]byte("an old line of an earlier daemon\n"), (bound-512)/33)
	if err := os.WriteFile(logPath, filler, 0o600); err != nil {
		t.Fatal(err)
	}
	w.exec(t, false, "true")
	w.waitDaemon(t, pid)
	for range 8 {
		w.exec(t, true, "echo not-a-path >&3")
	}
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(logPath)
	if fi.Size() > bound || !bytes.Contains(log, []byte("started anew")) {
		t.Fatalf("hostd.log is %d bytes (bound %d) after the daemon logged past its bound; its end:\n%s", fi.Size(), bound, log[max(0, len(log)-1500):])
	}
	if !bytes.Contains(log, []byte("was ignored")) {
		t.Fatalf("the daemon's later lines are not in its log:\n%s", log[max(0, len(log)-1500):])
	}
}

// TestCallerDescriptorsNotInherited: a descriptor the caller of sbx exec
// leaves open without close-on-exec (a shell's `exec 7>...`, a lock held
// with flock 9, the pipe of a $(...) around a script) stays with that call:
// neither the host daemon that call starts nor the sandbox's init holds
// it. Both did: the daemon kept it for as long as it served (a caller
// reading to the pipe's end hung, a lock stayed taken), and the init, a
// process inside the sandbox's namespaces, had a host file open.
func TestCallerDescriptorsNotInherited(t *testing.T) {
	w := newWorld(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	lock, err := os.CreateTemp("", "hostdlock")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(lock.Name())
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sbxBin, "exec", "--keep", "--session", "hd", "--", "true")
	cmd.Dir, cmd.Env = w.code, w.env
	cmd.ExtraFiles = []*os.File{pw, lock} // fds 3 and 4 of sbx, without close-on-exec
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sbx exec: %v\n%s", err, out)
	}
	pw.Close()
	lock.Close()
	w.waitDaemon(t, 0)
	// The pipe ends once no process but this one held its writing end.
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, pr)
		ended <- err
	}()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		pr.Close()
		t.Fatalf("the caller's pipe did not end after sbx exec did: a process it started holds it (%v)", testenv.HostProcs(w.sessionDir("hd")))
	}
	// And the caller's lock is free again.
	f, err := os.Open(lock.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the caller's flock is still held after sbx exec ended: %v", err)
	}
}

// TestDaemonAfterARoundTripWithoutIt: a call that does not use the daemon
// (host_daemon off) runs its own round trip beside the daemon's session;
// the daemon's next call neither undoes nor refuses what that one synced:
// the sandbox's later edit and removal apply without a conflict.
func TestDaemonAfterARoundTripWithoutIt(t *testing.T) {
	w := newWorld(t)
	w.exec(t, false, "true")
	w.waitDaemon(t, 0)
	own := w.env
	w.env = append(append([]string(nil), own...), "SBX_HOST_DAEMON=false")
	r := w.sbx(t, "exec", "--keep", "--session", "hd", "--", "echo three > README; echo g > g")
	if r.code != 0 || strings.Contains(r.stderr, viaDaemon) {
		t.Fatalf("the call without the daemon: exit %d\n%s", r.code, r.stderr)
	}
	w.env = own
	r = w.exec(t, true, "echo four > README; rm g")
	if strings.Contains(r.stderr, "conflict") {
		t.Fatalf("the daemon's call saw a conflict:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "README")); string(b) != "four\n" {
		t.Fatalf("README on the host: %q, want the sandbox's last edit", b)
	}
	if _, err := os.Lstat(filepath.Join(w.code, "g")); err == nil {
		t.Fatalf("g is still on the host after the sandbox removed it")
	}
}
