package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The attacks of issue 10 section 1 (the host kernel), run as a sandboxed
// command through the real `sbx exec`.

// kernelAttack tries to open host-global sysctls and sysrq-trigger for
// writing, writes core_pattern (with its own value, so that a failure of the
// guard changes nothing on the host), and reads the interfaces that leak host
// kernel state. Each line it prints names what got through.
const kernelAttack = `
for f in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/sysrq-trigger; do
  if (exec 3>>"$f") 2>/dev/null; then echo "OPENED $f"; fi
done
v=$(cat /proc/sys/kernel/core_pattern)
if ( printf '%s\n' "$v" > /proc/sys/kernel/core_pattern ) 2>&1; then echo "WROTE core_pattern"; fi
for f in /proc/keys /proc/kcore /proc/timer_list /proc/slabinfo /proc/vmallocinfo /proc/sched_debug /proc/kpageflags; do
  n=$(head -c 4096 "$f" 2>/dev/null | wc -c)
  if [ "$n" != 0 ]; then echo "READ $f $n"; fi
done
if ls -A /sys/firmware 2>/dev/null | grep -q .; then echo "LISTED /sys/firmware"; fi
grep -E ' /proc/sys | /proc/sysrq-trigger ' /proc/self/mounts | grep -v ' ro,' | sed 's/^/WRITABLE /'
echo done
`

func checkKernelAttack(t *testing.T, who string, out string) {
	t.Helper()
	if !strings.Contains(out, "done") {
		t.Fatalf("%s: the attack script did not finish:\n%s", who, out)
	}
	for _, bad := range []string{"OPENED", "WROTE", "READ", "LISTED", "WRITABLE"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: the sandbox reached the host kernel (%s):\n%s", who, bad, out)
		}
	}
	// The read-only mount is what refuses the write, whatever the uid.
	if !strings.Contains(out, "Read-only file system") {
		t.Errorf("%s: writing core_pattern did not fail with EROFS (is /proc/sys read-only?):\n%s", who, out)
	}
}

func hostSysctl(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		t.Fatalf("read the host's %s: %v", name, err)
	}
	return string(b)
}

func TestKernelKnobsOutOfReach(t *testing.T) {
	w := newWorld(t)
	before := hostSysctl(t, "kernel/core_pattern")
	r := w.sbx(t, w.code, "exec", "--", kernelAttack)
	if after := hostSysctl(t, "kernel/core_pattern"); after != before {
		t.Fatalf("the host's core_pattern changed from %q to %q", before, after)
	}
	if r.code != 0 {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	checkKernelAttack(t, "as "+strconv.Itoa(os.Getuid()), r.stdout+r.stderr)
}

// uidMap reads a process's uid map as seen from the host: inside, host
// lower, count per line.
func uidMap(t *testing.T, pid int) [][3]int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/uid_map")
	if err != nil {
		t.Fatalf("read the init's uid map: %v", err)
	}
	var out [][3]int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("uid map line %q", l)
		}
		var e [3]int
		for i := range f {
			e[i], _ = strconv.Atoi(f[i])
		}
		out = append(out, e)
	}
	return out
}

func TestSandboxNeverHostRoot(t *testing.T) {
	w := newWorld(t)
	r := w.sbx(t, w.code, "exec", "--keep", "--session", "uid", "--",
		"cat /proc/self/uid_map; id -u; printf 'from the sandbox\\n' > made.txt")
	if r.code != 0 {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	defer w.sbx(t, w.code, "release", "--session", "uid")
	// Inside, uid 1000 maps to the init's 1000, never to 0.
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if f := strings.Fields(l); len(f) == 3 && (f[0] == "0" || f[1] == "0") {
			t.Errorf("the command's uid map names uid 0: %q", l)
		}
	}
	// From the host, the init's map says what uid 1000 really is.
	states, _ := filepath.Glob(filepath.Join(w.state, "sbx", "sessions", "*", "local.json"))
	if len(states) != 1 {
		t.Fatalf("want one local.json under %s, found %v", w.state, states)
	}
	var st struct {
		Pid     int `json:"pid"`
		HostUID int `json:"host_uid"`
	}
	raw, _ := os.ReadFile(states[0])
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	m := uidMap(t, st.Pid)
	if len(m) != 1 || m[0][0] != 1000 || m[0][2] != 1 {
		t.Fatalf("the init's uid map is %v, want one id: 1000", m)
	}
	host := m[0][1]
	if host == 0 {
		t.Fatalf("the sandbox's uid 1000 is host uid 0")
	}
	if os.Getuid() != 0 && host != os.Getuid() {
		t.Fatalf("as an ordinary user the sandbox must be that user (%d), it is %d", os.Getuid(), host)
	}
	if host != st.HostUID {
		t.Fatalf("local.json says host uid %d, the kernel %d", st.HostUID, host)
	}
	// The workspace copy belongs to the mapped uid; the code dir's file, as
	// the sync writes it, to the user running sbx, with its content.
	works, _ := filepath.Glob(filepath.Join(workRoot(filepath.Dir(states[0])), "*", "made.txt"))
	if len(works) != 1 {
		t.Fatalf("the workspace copy of made.txt: found %v", works)
	}
	if fi, err := os.Stat(works[0]); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(host) {
		t.Fatalf("workspace file owned by %v, want the sandbox's host uid %d (%v)", fi.Sys().(*syscall.Stat_t).Uid, host, err)
	}
	fi, err := os.Stat(filepath.Join(w.code, "made.txt"))
	if err != nil {
		t.Fatalf("the file did not come back: %v", err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != uint32(os.Getuid()) {
		t.Fatalf("the file came back owned by %d, want the user running sbx (%d)", uid, os.Getuid())
	}
	if b, _ := os.ReadFile(filepath.Join(w.code, "made.txt")); string(b) != "from the sandbox\n" {
		t.Fatalf("the file came back as %q", b)
	}
	// A second command in the same sandbox still writes the workspace.
	if r := w.sbx(t, w.code, "exec", "--session", "uid", "--", "echo more >> made.txt && cat made.txt"); r.code != 0 || r.stdout != "from the sandbox\nmore\n" {
		t.Fatalf("second command: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// TestUnprivilegedUserKernelOutOfReach runs the same attack with sbx run by
// an ordinary user (65534), where the sandbox is that user's own uid.
func TestUnprivilegedUserKernelOutOfReach(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("running as an ordinary user already: TestKernelKnobsOutOfReach covers it")
		return
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) is needed to run sbx as an ordinary user: apt-get install util-linux")
	}
	w := newWorld(t)
	for _, d := range []string{w.home, w.state, w.code} {
		if out, err := exec.Command("chown", "-R", "65534:65534", d).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v %s", d, err, out)
		}
	}
	before := hostSysctl(t, "kernel/core_pattern")
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sbxBin, "exec", "--",
		kernelAttack+"\ncat /proc/self/uid_map; echo hi > made.txt")
	cmd.Dir, cmd.Env = w.code, w.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbx as an ordinary user: %v\n%s", err, out)
	}
	if after := hostSysctl(t, "kernel/core_pattern"); after != before {
		t.Fatalf("the host's core_pattern changed from %q to %q", before, after)
	}
	checkKernelAttack(t, "as 65534", string(out))
	fi, err := os.Stat(filepath.Join(w.code, "made.txt"))
	if err != nil {
		t.Fatalf("change not brought back: %v", err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
		t.Fatalf("file brought back owned by %d, want the user (65534)", uid)
	}
}

// TestMasksCannotBeUndone tries to remove the masks from the command's own
// namespaces and from a new user and mount namespace it makes, and checks the
// sandbox holds no host group: as root, sbx runs with supplementary groups 0
// (root) and 4 here, and the sandbox must not carry them.
func TestMasksCannotBeUndone(t *testing.T) {
	w := newWorld(t)
	var argv []string
	if os.Getuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Fatal("setpriv (util-linux) is needed to give sbx supplementary groups: apt-get install util-linux")
		}
		argv = []string{"setpriv", "--groups=0,4", "--"}
	}
	argv = append(argv, sbxBin, "exec", "--", `
umount /proc/keys 2>/dev/null; umount -l /proc/sys 2>/dev/null; mount -o remount,rw /proc/sys 2>/dev/null
n=$(head -c 4096 /proc/keys 2>/dev/null | wc -c); [ "$n" != 0 ] && echo "LEAK keys $n"
grep ' /proc/sys ' /proc/self/mounts | grep -q ' ro,' || echo "LEAK /proc/sys not read-only"
n=$(unshare -Urm sh -c 'umount -l /proc/keys; umount -l /proc; mount -t proc proc /proc; head -c 4096 /proc/keys | wc -c' 2>/dev/null)
[ -n "$n" ] && [ "$n" != 0 ] && echo "LEAK nested keys $n"
n=$(unshare -Urm sh -c 'mount -t proc proc /mnt && head -c 4096 /mnt/keys | wc -c' 2>/dev/null)
[ -n "$n" ] && [ "$n" != 0 ] && echo "LEAK fresh proc keys $n"
grep '^Groups:' /proc/self/status
echo done`)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = w.code, w.env
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(out, "LEAK") {
		t.Errorf("a mask was undone:\n%s", out)
	}
	if !strings.Contains(out, "Groups:\t\n") && !strings.Contains(out, "Groups:\t \n") {
		t.Errorf("the sandbox has supplementary groups (sbx's own, host groups):\n%s", out)
	}
}

// TestDoctorReportsLayers checks `sbx doctor` reports each layer from a real
// sandbox: the host uid the kernel mapped, the masks a command saw.
func TestDoctorReportsLayers(t *testing.T) {
	w := newWorld(t)
	r := w.sbx(t, w.code, "doctor", "--backend", "local")
	m := regexp.MustCompile(`(?m)^ok   uid mapping: sandbox uid 1000 is host uid (\d+) `).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no active uid mapping reported:\n%s%s", r.stdout, r.stderr)
	}
	if host, _ := strconv.Atoi(m[1]); host == 0 || (os.Getuid() != 0 && host != os.Getuid()) {
		t.Fatalf("doctor reports host uid %d (sbx runs as %d):\n%s", host, os.Getuid(), r.stdout)
	}
	if !regexp.MustCompile(`(?m)^ok   /proc masking: \d+ paths read-only or masked`).MatchString(r.stdout) {
		t.Errorf("/proc masking not reported active:\n%s", r.stdout)
	}
	for _, name := range []string{"seccomp", "Landlock", "cgroups"} {
		if !regexp.MustCompile(`(?m)^(ok  |FAIL) ` + name + `: \S`).MatchString(r.stdout) {
			t.Errorf("no %s line with a detail:\n%s", name, r.stdout)
		}
	}
	// Where the workspaces go: this machine (root, cgroups, /dev/shm) keeps
	// a small tree's in memory; workspace = "disk" says so.
	if !regexp.MustCompile(`(?m)^ok   workspaces: in memory under /\S+/sbx-\d+ for a tree of at most \d+ entries`).MatchString(r.stdout) {
		t.Errorf("no workspaces line that says in memory:\n%s", r.stdout)
	}
	r = w.sbxEnv(t, w.code, []string{"SBX_WORKSPACE=disk"}, "doctor", "--backend", "local")
	if !strings.Contains(r.stdout, `ok   workspaces: on disk, in each session's state dir (workspace = "disk")`) {
		t.Errorf("workspace = \"disk\" not reported:\n%s", r.stdout)
	}
}

// The sandbox's own uid is not the host's (as root it is a uid of its own),
// yet a command reopens its stdio by name, as shell scripts do all the time:
// `echo x >/dev/stderr`, /proc/self/fd/N. Checked with sbx's
// stdio as pipes and as regular host files.
func TestStdioReopenedByName(t *testing.T) {
	w := newWorld(t)
	script := `echo to-stderr >/dev/stderr; echo to-stdout >/dev/stdout; echo fd1 >/proc/self/fd/1; echo ok`
	check := func(how, stdout, stderr string) {
		t.Helper()
		for _, want := range []string{"to-stdout", "fd1", "ok"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: stdout lacks %q: stdout %q, stderr %q", how, want, stdout, stderr)
			}
		}
		if !strings.Contains(stderr, "to-stderr") || strings.Contains(stderr, "denied") {
			t.Errorf("%s: stderr %q, want to-stderr and no refusal", how, stderr)
		}
	}

	// Pipes: what a caller capturing sbx's output hands it.
	cmd := exec.Command(sbxBin, "exec", "--", script)
	cmd.Dir, cmd.Env = w.code, w.env
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("sbx exec with pipes: %v\n%s%s", err, so.String(), se.String())
	}
	check("pipes", so.String(), se.String())

	// Regular files: `sbx exec ... >out 2>err`.
	dir := tempDir(t)
	open := func(name string, flag int) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, name), flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	cmd = exec.Command(sbxBin, "exec", "--", script)
	cmd.Dir, cmd.Env = w.code, w.env
	cmd.Stdout = open("out", os.O_CREATE|os.O_WRONLY)
	cmd.Stderr = open("err", os.O_CREATE|os.O_WRONLY)
	if err := cmd.Run(); err != nil {
		t.Fatalf("sbx exec with files: %v", err)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out"))
	errb, _ := os.ReadFile(filepath.Join(dir, "err"))
	check("files", string(out), string(errb))
	// The host files keep their owner: sbx never hands them over.
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "out"), &st); err != nil || int(st.Uid) != os.Geteuid() {
		t.Errorf("the host's output file changed owner to %d (err %v)", st.Uid, err)
	}
}
