//go:build linux

package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/rmtree"
	"github.com/sbx-sh/sbx/sandbox"
)

// Provider starts sandboxes on this machine with Linux namespaces.
type Provider struct {
	// Version is reported by the init and checked when re-attaching.
	Version string
	// ClaimTimeout bounds how long a sandbox may take to start; zero means 30s.
	ClaimTimeout time.Duration
	// Egress, when it allows hosts, gives each sandbox with its own network
	// an egress proxy for them (egress_linux.go); ignored with NetworkHost.
	Egress *Egress
	// Caches, when set, gives the mounts and variables of the package
	// caches of a sandbox with this state dir whose user is uid:gid on the
	// host (see package cache).
	Caches func(stateDir string, uid, gid int) ([]sandbox.Mount, []string, error)
	// Log, when set, gets the debug line that says which binary the
	// sandbox's stages run (stagebin_linux.go).
	Log *slog.Logger
}

// Name returns "local".
func (p *Provider) Name() string { return "local" }

// ErrUserNamespaces means the kernel refused to create a user namespace.
var ErrUserNamespaces = errors.New("user namespaces are not available")

// state is what the host keeps about a running init, in <state>/local.json.
type state struct {
	Version   int      `json:"version"`
	Pid       int      `json:"pid"`
	StartTime uint64   `json:"start_time"` // from /proc/<pid>/stat, to tell a reused pid apart
	Socket    string   `json:"socket"`
	Cgroups   []string `json:"cgroups,omitempty"`
	Started   string   `json:"started"`
	// HostUID and HostGID are what the sandbox's uid and gid 1000 are on
	// the host; IDSource says where they came from.
	HostUID  int    `json:"host_uid"`
	HostGID  int    `json:"host_gid"`
	IDSource string `json:"id_source,omitempty"`
	// CgroupNote says why there is no cgroup (limits are rlimits then).
	CgroupNote string `json:"cgroup_note,omitempty"`
	// Env is added to every command's environment (the proxy, the caches).
	Env []string `json:"env,omitempty"`
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// Claim starts a new sandbox init for spec and waits until it serves.
func (p *Provider) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) != m.Target || m.Target == "/" {
			return nil, fmt.Errorf("mount target %q must be a clean absolute path other than /", m.Target)
		}
	}
	rootDir := filepath.Join(spec.StateDir, "rootfs")
	if err := os.MkdirAll(rootDir, 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox root: %w", err)
	}
	sock := filepath.Join(spec.StateDir, "init.sock")
	if len(sock) > 100 {
		return nil, fmt.Errorf("state directory path %s is too long for a unix socket (over 100 bytes): set XDG_STATE_HOME to a shorter path", spec.StateDir)
	}
	os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		return nil, err
	}
	defer lnFile.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyR.Close()
	defer readyW.Close()
	logPath := filepath.Join(spec.StateDir, "init.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create init log: %w", err)
	}
	defer logFile.Close()

	net := spec.Network
	if net == "" {
		net = sandbox.NetworkNone
	}
	ids, err := allocHostIDs(filepath.Dir(spec.StateDir))
	if err != nil {
		return nil, fmt.Errorf("choose the sandbox's host uid: %w", err)
	}
	if ids.lock != nil {
		// The init inherits the slot's lock; this copy is not needed once
		// it runs.
		defer ids.lock.Close()
	}
	add, err := p.extras(ctx, &spec, ids)
	if err != nil {
		return nil, err
	}
	if ids.UID != os.Geteuid() {
		// The sandbox runs as another host uid than sbx: give it what it
		// must read and write, the workspaces and the copies of the sync
		// paths. Only what lies in the session's state dir is sbx's to
		// give; a mount from elsewhere keeps its owner.
		for _, m := range spec.Mounts {
			d := m.Source
			if !within(spec.StateDir, d) && (spec.WorkRoot == "" || !within(spec.WorkRoot, d)) {
				continue
			}
			if err := chownTree(d, ids); err != nil {
				// A writable mount the last sandbox of the session filled
				// (its cache = "session" caches; the workspaces are new and
				// empty here) with what cannot be walked by path (a chain of
				// directories past PATH_MAX): every later claim of the
				// session failed on it. A cache is only a cache: it starts
				// empty instead.
				if fi, lerr := os.Lstat(d); m.ReadOnly || lerr != nil || !fi.IsDir() {
					return nil, err
				}
				logDebug(p.Log, "a writable mount the last sandbox left could not be given to the new one: emptied", "dir", d, "why", err)
				if rerr := rmtree.Path(d); rerr != nil {
					return nil, err
				}
				if err := os.Mkdir(d, 0o755); err != nil {
					return nil, err
				}
				if err := os.Lchown(d, ids.UID, ids.GID); err != nil {
					return nil, err
				}
			}
		}
	}
	cg, cgErr := newCgroups(filepath.Base(spec.StateDir), spec.Limits)
	if spec.WorkRoot != "" && (cgErr != nil || spec.Limits.MemoryBytes <= 0) {
		// A workspace in memory is bounded by the memory cgroup alone.
		why := "no memory limit"
		if cgErr != nil {
			why = cgErr.Error()
		} else if cg != nil {
			cg.remove()
		}
		return nil, fmt.Errorf("the workspaces are in memory (%s) but nothing bounds what the sandbox writes there: %s; set workspace = \"disk\"", spec.WorkRoot, why)
	}
	cfg := initConfig{
		Name: spec.Name, RootDir: rootDir, Mounts: spec.Mounts, Network: net,
		IdleTTL: spec.IdleTTL.Milliseconds(), Limits: spec.Limits, Rlimits: cgErr != nil,
		Version: p.Version, HostName: "sbx", HostUID: ids.UID, HostGID: ids.GID,
		EgressPort: add.egressPort(),
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}

	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC)
	if net != sandbox.NetworkHost {
		flags |= syscall.CLONE_NEWNET
	}
	extra := []*os.File{cfgR, lnFile, readyW}
	if ids.lock != nil {
		extra = append(extra, ids.lock) // fdIDLock
	}
	// The init starts with sbx's own credentials inside the new user
	// namespace (unmapped there when sbx is root), so that it can still
	// reach its root and the workspaces in the state dir (which may sit
	// under a 0700 home) while it takes hold of them. It then switches to
	// uid 1000, the only id mapped, before it builds anything else: see
	// takeHostPaths. Setgroups is allowed only for root, who must drop its
	// supplementary groups there; an ordinary user may not allow it.
	add.bin = stageFor(p.Log, spec.Mounts)
	exe, extra, exeEnv := commandFor(add.bin, extra)
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       []string{"sbx-init", spec.Name},
		Env:        append([]string{envStage + "=setup"}, exeEnv...),
		Dir:        "/",
		Stderr:     logFile,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: ids.UID, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: sandboxGID, HostID: ids.GID, Size: 1}},
			GidMappingsEnableSetgroups: os.Geteuid() == 0,
			AmbientCaps: []uintptr{
				unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN,
				unix.CAP_SYS_CHROOT, unix.CAP_SYS_RESOURCE, unix.CAP_SETUID, unix.CAP_SETGID,
			},
			Setsid: true,
		},
	}
	if err := cmd.Start(); err != nil {
		if cg != nil {
			cg.remove()
		}
		return nil, userNamespaceError(err)
	}
	// The init outlives this process when the session is kept; reap it here
	// while we live.
	go cmd.Wait()
	cfgR.Close()
	readyW.Close()
	fail := func(err error) (sandbox.Sandbox, error) {
		cmd.Process.Kill()
		if cg != nil {
			cg.remove()
		}
		return nil, err
	}
	if cg != nil {
		if err := cg.add(cmd.Process.Pid); err != nil {
			return fail(err)
		}
	}
	if _, err := cfgW.Write(raw); err != nil {
		return fail(fmt.Errorf("send config to sandbox init: %w", err))
	}
	cfgW.Close()

	timeout := p.ClaimTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	line, err := readLine(ctx, readyR, timeout)
	if err != nil || line != "ok" {
		logged, _ := os.ReadFile(logPath)
		reason := strings.TrimPrefix(line, "error: ")
		if err != nil {
			reason = err.Error()
		}
		if len(logged) > 0 {
			reason += "; init log: " + strings.TrimSpace(string(logged))
		}
		return fail(fmt.Errorf("start local sandbox: %s", reason))
	}
	if err := add.start(ctx, spec.StateDir, timeout); err != nil {
		return fail(err)
	}
	st := state{Version: 1, Pid: cmd.Process.Pid, Socket: sock, Started: time.Now().UTC().Format(time.RFC3339Nano),
		HostUID: ids.UID, HostGID: ids.GID, IDSource: ids.Source, Env: add.env}
	if cgErr != nil {
		st.CgroupNote = cgErr.Error()
	}
	st.StartTime, _ = procStartTime(st.Pid)
	if cg != nil {
		st.Cgroups = cg.dirs
	}
	if err := writeJSON(filepath.Join(spec.StateDir, stateFile), st); err != nil {
		return fail(err)
	}
	return &box{dir: spec.StateDir, st: st}, nil
}

func userNamespaceError(err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%w (%v): sbx's local sandbox needs unprivileged user namespaces; enable them with "+
			"`sysctl -w kernel.unprivileged_userns_clone=1` (Debian), `sysctl -w user.max_user_namespaces=15000`, "+
			"or on Ubuntu 24.04+ `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; sbx never runs commands unsandboxed",
			ErrUserNamespaces, err)
	}
	return fmt.Errorf("start sandbox init: %w", err)
}

// readLine reads one line from r, giving up after timeout or when ctx ends.
func readLine(ctx context.Context, r *os.File, timeout time.Duration) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err == io.EOF && line == "" {
			err = errors.New("the sandbox init exited before it was ready")
		} else if err == io.EOF {
			err = nil
		}
		ch <- result{strings.TrimSpace(line), err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case res := <-ch:
		return res.line, res.err
	case <-t.C:
		return "", fmt.Errorf("the sandbox init was not ready after %s", timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Attach finds the init a previous Claim left in spec.StateDir.
func (p *Provider) Attach(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	var st state
	raw, err := os.ReadFile(filepath.Join(spec.StateDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, sandbox.ErrNotFound
	}
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	b := &box{dir: spec.StateDir, st: st}
	if err != nil {
		b.cleanup()
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: "unreadable state: " + err.Error()}
	}
	if !b.alive() {
		b.cleanup()
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("its init (pid %d) is gone", st.Pid)}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var r reply
	if err := b.call(pctx, request{Op: "ping"}, &r); err != nil {
		b.killNow()
		b.cleanup()
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("its init (pid %d) does not answer: %v", st.Pid, err)}
	}
	if r.Version != p.Version {
		b.killNow()
		b.cleanup()
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("it was started by sbx %s, this is %s", r.Version, p.Version)}
	}
	// What the OOM killer did before this attach is not a loss of ours.
	b.oomSeen.Store(oomKills(st.Cgroups))
	return b, nil
}

// box is a running local sandbox, reached through its init's socket.
type box struct {
	dir      string
	st       state
	released sync.Once
	// oomSeen is the sandbox's OOM kill count already accounted for (when
	// opened, or at the last loss said to be one): a loss is said to be the
	// OOM killer's only when the count rose past it.
	oomSeen atomic.Int64
}

// lostToOOM reports whether the OOM killer ended a process of the sandbox
// since the count was last seen.
func (b *box) lostToOOM() bool {
	n := oomKills(b.st.Cgroups)
	for {
		seen := b.oomSeen.Load()
		if n <= seen {
			return false
		}
		if b.oomSeen.CompareAndSwap(seen, n) {
			return true
		}
	}
}

func (b *box) dial(ctx context.Context) (*conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", b.st.Socket)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to sandbox init: %v", sandbox.ErrUnreachable, err)
	}
	return newConn(c.(*net.UnixConn)), nil
}

// call sends one request without descriptors and reads one reply.
func (b *box) call(ctx context.Context, req request, r *reply) error {
	c, err := b.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl)
	}
	if err := c.writeFrame(req); err != nil {
		return err
	}
	_, err = c.readFrame(r)
	return err
}

// alive reports whether the init process recorded in the state still runs.
func (b *box) alive() bool {
	if b.st.Pid <= 0 {
		return false
	}
	st, err := procStartTime(b.st.Pid)
	return err == nil && st == b.st.StartTime
}

// killWait bounds how long kill waits for the sandbox to be gone.
const killWait = 15 * time.Second

// pidfd opens a pidfd on the init if the pid still names it (same start
// time; a zombie leader counts, see kill). It is -1 if the init is gone.
func (b *box) pidfd() int {
	if b.st.Pid <= 0 {
		return -1
	}
	pfd, err := unix.PidfdOpen(b.st.Pid, 0)
	if err != nil {
		return -1
	}
	// Checked after the open: a pid reused before it names another process.
	if st, err := procStartTimeAny(b.st.Pid); err != nil || st != b.st.StartTime {
		unix.Close(pfd)
		return -1
	}
	return pfd
}

// waitGone waits up to d for the process of pfd to have exited whole.
func waitGone(pfd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(d); ; {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if n > 0 {
			return true
		}
		if err != nil && err != unix.EINTR {
			return false
		}
	}
}

// kill ends the init, and with it every process of the sandbox, and returns
// once they are gone (or after killWait, logged). If the init was asked to
// shut down first, grace is how long it has to do so.
//
// /proc/<pid>/stat is not the test: when the init exits, its main thread
// shows as a zombie at once, while its last thread is still emptying the pid
// namespace (the kernel kills and reaps every process in it before the init
// counts as exited), so a caller that trusted it returned while the
// sandbox's processes still ran. A pidfd becomes readable only when the
// whole thread group has exited, which is after the namespace is empty.
func (b *box) kill(pfd int, grace time.Duration) {
	if pfd < 0 {
		return
	}
	if grace > 0 && waitGone(pfd, grace) {
		return
	}
	unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
	if !waitGone(pfd, killWait) {
		fmt.Fprintf(os.Stderr, "sbx: the sandbox's init (pid %d) was still there %v after SIGKILL; its processes may outlive the release\n", b.st.Pid, killWait)
	}
}

// killNow is kill for a sandbox given up on (no shutdown asked).
func (b *box) killNow() {
	pfd := b.pidfd()
	if pfd >= 0 {
		defer unix.Close(pfd)
	}
	b.kill(pfd, 0)
}

// cleanup removes what the backend keeps in the state directory. The engine
// removes the rest (workspaces).
func (b *box) cleanup() {
	for _, d := range b.st.Cgroups {
		// A cgroup can only be removed once its processes are gone.
		for i := 0; i < 100; i++ {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, name := range []string{"init.sock", stateFile, "init.log"} {
		os.Remove(filepath.Join(b.dir, name))
	}
	os.Remove(filepath.Join(b.dir, "rootfs"))
	os.RemoveAll(egressDir(b.dir))
}

// WorkspacesOnHost says that the sandbox's workspaces are the host
// directories of its Spec.Mounts, bound in: the session may fill them
// before the first command (session/place.go, sync.Round.Place).
func (b *box) WorkspacesOnHost() bool { return true }

// Release shuts the init down, which kills everything in the sandbox.
func (b *box) Release(ctx context.Context) error {
	b.released.Do(func() {
		// Opened before the shutdown, so that the pid cannot have been
		// reused by the time it is waited on.
		pfd := b.pidfd()
		if pfd >= 0 {
			defer unix.Close(pfd)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var r reply
		b.call(cctx, request{Op: "shutdown"}, &r)
		b.kill(pfd, 200*time.Millisecond)
		b.cleanup()
	})
	return nil
}

// procStartTime reads a live process's start time (field 22 of
// /proc/pid/stat); a zombie is an error.
func procStartTime(pid int) (uint64, error) {
	return readStartTime(pid, false)
}

// procStartTimeAny is procStartTime that accepts a zombie.
func procStartTimeAny(pid int) (uint64, error) {
	return readStartTime(pid, true)
}

func readStartTime(pid int, zombie bool) (uint64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, errors.New("bad stat")
	}
	if !zombie && (fields[0] == "Z" || fields[0] == "X") {
		return 0, errors.New("process is a zombie")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
