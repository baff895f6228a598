//go:build linux

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/sandbox"
)

// The init runs in two stages, both as uid 1000 inside a new user namespace.
//
// Stage "setup" starts with a few ambient capabilities (granted in the new user
// namespace only), builds the sandbox's file system, drops every capability,
// empties the bounding set, sets no_new_privs, and then re-executes itself as
// stage "serve". Capabilities and no_new_privs are per-thread attributes, so
// the setup stage runs entirely on the locked main thread and ends in execve:
// the serving process starts single-threaded with nothing to drop.

// File descriptors the parent hands to the init.
const (
	fdConfig   = 3 // pipe: the initConfig as JSON (setup stage only)
	fdListener = 4 // the unix socket the init serves on
	fdReady    = 5 // pipe: "ok\n" or an error line once set up
	// fdIDLock, when sbx runs as root, holds the flock on the host id slot
	// the sandbox uses (see hostids_linux.go). The init never closes it,
	// so the slot is free exactly when the sandbox is gone.
	//lint:ignore U1000 names the descriptor the init inherits the id lock on; the init only keeps it open, never uses it by number
	fdIDLock = 6
)

const (
	sandboxUID  = 1000
	sandboxGID  = 1000
	sandboxHome = sandbox.Home
	envStage    = "SBX_LOCAL_INIT"
	envConfig   = "SBX_LOCAL_INIT_CONFIG"
)

// initConfig is what the parent tells the init.
type initConfig struct {
	Name     string          `json:"name"`
	RootDir  string          `json:"root_dir"` // empty dir on the host that becomes the new root
	Mounts   []sandbox.Mount `json:"mounts"`
	Network  sandbox.Network `json:"network"`
	IdleTTL  int64           `json:"idle_ttl_ms"`
	Limits   sandbox.Limits  `json:"limits"`
	Rlimits  bool            `json:"rlimits"` // apply Limits as rlimits (no cgroup)
	Version  string          `json:"version"`
	HostName string          `json:"hostname"`
	// HostUID and HostGID are what uid and gid 1000 are on the host.
	HostUID int `json:"host_uid"`
	HostGID int `json:"host_gid"`
	// EgressPort, when set, is the egress proxy's port on the sandbox's
	// loopback (egress_linux.go).
	EgressPort int `json:"egress_port,omitempty"`
}

// Stage is the init stage this process was started as, or "" when it is not
// a sandbox init.
func stage() string { return os.Getenv(envStage) }

func init() {
	if st := stage(); st == "setup" || st == "worker" {
		// Keep the main goroutine on the main thread: the capability and
		// no_new_privs changes below are per-thread and must be made on the
		// thread that calls execve.
		runtime.LockOSThread()
	}
}

// Main runs the sandbox init when this process was started as one, and never
// returns in that case. Every binary that can start local sandboxes (sbx,
// sbx-mcp, test binaries) calls it first thing in main or TestMain.
func Main() {
	if stage() == "" {
		return
	}
	closeStageExe()
	switch stage() {
	case "setup":
		err := runSetup()
		reportReady(err)
		os.Exit(1)
	case "serve":
		os.Exit(runServe())
	case "worker":
		os.Exit(runWorker())
	case "egress":
		os.Exit(runEgress())
	case "rmtree":
		os.Exit(runRemove())
	default:
		fmt.Fprintf(os.Stderr, "sbx init: unknown stage %q\n", stage())
		os.Exit(1)
	}
}

func reportReady(err error) {
	f := os.NewFile(fdReady, "ready")
	if err != nil {
		fmt.Fprintf(f, "error: %v\n", err)
	} else {
		fmt.Fprintln(f, "ok")
	}
	f.Close()
}

func runSetup() error {
	raw, err := readAllFd(fdConfig)
	if err != nil {
		return fmt.Errorf("read init config: %w", err)
	}
	var cfg initConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("parse init config: %w", err)
	}
	if err := buildRoot(&cfg); err != nil {
		return err
	}
	if cfg.HostName != "" {
		if err := unix.Sethostname([]byte(cfg.HostName)); err != nil {
			return fmt.Errorf("set hostname: %w", err)
		}
	}
	if cfg.Network != sandbox.NetworkHost {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bring up loopback: %w", err)
		}
	}
	if cfg.Rlimits {
		if err := applyRlimits(cfg.Limits); err != nil {
			return err
		}
	}
	if err := limitFileSize(cfg.Limits.DiskBytes); err != nil {
		return err
	}
	if err := dropPrivileges(); err != nil {
		return err
	}
	for _, fd := range []int{fdListener, fdReady} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("keep descriptor %d: %w", fd, err)
		}
	}
	env := []string{envStage + "=serve", envConfig + "=" + string(raw)}
	// Start the first worker now, so that its program start overlaps the
	// serving stage's. It is forked from this thread, which holds nothing
	// any more. If it cannot be started here, the serving stage starts one.
	if w, err := startWorker(); err == nil {
		if kv, err := w.handOver(); err == nil {
			env = append(env, kv)
		} else {
			w.kill()
		}
	}
	err = unix.Exec("/proc/self/exe", []string{"sbx-init", cfg.Name}, env)
	return fmt.Errorf("start serving stage: %w", err)
}

func readAllFd(fd int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), "config")
	defer f.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if b.Len() > 0 {
				return []byte(b.String()), nil
			}
			return nil, err
		}
	}
}

// systemDirs are bound read-only from the host. A host symlink (merged /usr)
// is recreated as the same symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the host's /etc entries a toolchain needs, bound read-only.
// passwd, group and hostname are written by sbx instead, so the host's user
// list does not leak in.
var etcFiles = []string{
	"resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
	"localtime", "timezone", "locale.alias", "locale.gen", "mime.types",
	"os-release", "debian_version", "shells", "bash.bashrc", "profile", "inputrc", "environment",
	"manpath.config", "magic", "ssh/ssh_config",
}

func buildRoot(cfg *initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", cfg.RootDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=0755,size=64m,uid=%d,gid=%d", sandboxUID, sandboxGID)); err != nil {
		return fmt.Errorf("mount root tmpfs on %s: %w", cfg.RootDir, err)
	}
	sources, err := takeHostPaths(cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, fd := range sources {
			unix.Close(fd)
		}
	}()
	// From here on the root is the working directory: the host path to it
	// may not be reachable as uid 1000.
	root := "."
	for _, d := range systemDirs {
		if err := bindSystem(root, d); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(root+"/etc/ssh", 0o755); err != nil {
		return err
	}
	for _, name := range etcFiles {
		if err := bindSystem(root, "/etc/"+name); err != nil {
			return err
		}
	}
	files := map[string]string{
		"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n" +
			fmt.Sprintf("sbx:x:%d:%d:sbx sandbox:%s:/bin/bash\n", sandboxUID, sandboxGID, sandboxHome) +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"/etc/group":    fmt.Sprintf("root:x:0:\nsbx:x:%d:\nnogroup:x:65534:\n", sandboxGID),
		"/etc/hostname": cfg.HostName + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(root+name, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := buildDev(root); err != nil {
		return err
	}
	if err := os.MkdirAll(root+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, t := range []struct{ dir, opts string }{
		{"/tmp", "mode=1777"},
		{sandboxHome, "mode=0755"},
		// /run holds the sync helper's manifests (tens of MB for a 100k-file
		// tree): no size of its own; like /tmp, its pages count against the
		// sandbox's memory limit.
		{"/run", "mode=0755"},
	} {
		if err := os.MkdirAll(root+t.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", root+t.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, t.opts); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", t.dir, err)
		}
	}
	// /var/tmp is the sandbox's /tmp, bound there rather than a symbolic
	// link to it: a link in the new root would lead a mount target below
	// it (a code dir under the host's /var/tmp) to the host's /tmp before
	// the pivot, where MkdirAll would make its directories and the bind
	// would land out of the sandbox's sight.
	if err := os.MkdirAll(root+"/var/tmp", 0o755); err != nil {
		return err
	}
	if err := unix.Mount(root+"/tmp", root+"/var/tmp", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /tmp at /var/tmp: %w", err)
	}
	mounts := append([]sandbox.Mount(nil), cfg.Mounts...)
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].Target) < len(mounts[j].Target) })
	for _, m := range mounts {
		dst := root + m.Target
		if err := noLinkBelow(root, m.Target); err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
		fd, ok := sources[m.Source]
		if !ok {
			return fmt.Errorf("mount %s: its source %s was not opened", m.Target, m.Source)
		}
		src := fmt.Sprintf("/proc/self/fd/%d", fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = os.MkdirAll(dst, 0o755)
		} else if fi, lerr := os.Lstat(dst); lerr == nil && fi.Mode().IsRegular() {
			// A file already there, in a read-only bind (the CA bundle
			// over the system's, egress_linux.go): bound over as it is.
		} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("create mount point for %s: %w", m.Target, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := remountRO(dst); err != nil {
				return fmt.Errorf("make %s read-only: %w", m.Target, err)
			}
		}
	}
	if err := os.MkdirAll(root+"/.oldroot", 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "./.oldroot"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return err
	}
	// The root tmpfs holds only mount points and sbx's own /etc files: make it
	// read-only so the sandbox writes only where it is meant to.
	if err := remountRO("/"); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	return nil
}

// takeHostPaths opens the mount sources and enters the root while this
// process still has the credentials of the user who runs sbx, then becomes
// uid and gid 1000 (the sandbox's, mapped to the host ids chosen for it)
// with no supplementary groups. As an ordinary user it is uid 1000 already.
// As root it starts unmapped in the namespace: it may reach root's state dir
// but may create nothing in its own file systems until it switches. The
// sources are bound later through /proc/self/fd, which needs no search
// permission on the host directories above them.
func takeHostPaths(cfg *initConfig) (map[string]int, error) {
	sources := map[string]int{}
	fail := func(err error) (map[string]int, error) {
		for _, fd := range sources {
			unix.Close(fd)
		}
		return nil, err
	}
	for _, m := range cfg.Mounts {
		if _, ok := sources[m.Source]; ok {
			continue
		}
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("open mount source %s for %s: %w", m.Source, m.Target, err))
		}
		sources[m.Source] = fd
	}
	if err := unix.Chdir(cfg.RootDir); err != nil {
		return fail(fmt.Errorf("enter the sandbox root %s: %w", cfg.RootDir, err))
	}
	if os.Geteuid() != sandboxUID || os.Getegid() != sandboxGID {
		// syscall's Set* change every thread of this process, not only
		// this one.
		if err := syscall.Setgroups(nil); err != nil {
			return fail(fmt.Errorf("drop supplementary groups: %w", err))
		}
		if err := syscall.Setresgid(sandboxGID, sandboxGID, sandboxGID); err != nil {
			return fail(fmt.Errorf("become gid %d (host gid %d): %w", sandboxGID, cfg.HostGID, err))
		}
		if err := syscall.Setresuid(sandboxUID, sandboxUID, sandboxUID); err != nil {
			return fail(fmt.Errorf("become uid %d (host uid %d): %w", sandboxUID, cfg.HostUID, err))
		}
		// A change of uid makes the process non-dumpable; the worker this
		// stage starts must be able to write its own uid map, which needs
		// its parent dumpable (as it is after an ordinary start).
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("set dumpable: %w", err))
		}
	}
	return sources, nil
}

// bindSystem makes the host path p appear read-only at the same path under
// root. Missing paths are skipped; symlinks are recreated, not followed.
func bindSystem(root, p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	dst := root + p
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		// A symlinked /etc file (resolv.conf -> /run/...) is bound through
		// its target instead, since the target's directory is not in the
		// sandbox.
		if strings.HasPrefix(p, "/etc/") {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				if rfi, err := os.Stat(real); err == nil {
					return bindPath(real, dst, rfi.IsDir())
				}
			}
			return nil
		}
		return os.Symlink(target, dst)
	case fi.IsDir():
		return bindPath(p, dst, true)
	case fi.Mode().IsRegular():
		return bindPath(p, dst, false)
	}
	return nil
}

func bindPath(src, dst string, dir bool) error {
	if dir {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	} else {
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := remountRO(dst); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// remountRO makes the bind mount at p read-only, keeping the flags the
// kernel locks in a user namespace (nosuid, nodev, noexec, atime).
func remountRO(p string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", p, "", flags, "")
}

func buildDev(root string) error {
	dev := root + "/dev"
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		f, err := os.OpenFile(dev+"/"+n, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/dev/"+n, dev+"/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func applyRlimits(l sandbox.Limits) error {
	if l.MemoryBytes > 0 {
		lim := uint64(l.MemoryBytes)
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			return fmt.Errorf("set memory rlimit: %w", err)
		}
	}
	if l.Pids > 0 {
		lim := uint64(l.Pids)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			return fmt.Errorf("set process rlimit: %w", err)
		}
	}
	return nil
}

// dropPrivileges empties every capability set of this thread, the bounding
// set included, and sets no_new_privs, so neither the serving stage nor any
// command it starts can gain a capability again (setuid binaries and file
// capabilities are ignored under no_new_privs).
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}

// Kernel interfaces a command must not change or read, as the OCI runtimes
// hide them by default (runc's and containerd's default spec, moby's
// oci/defaults.go), plus the kernel memory maps and allocator statistics
// that leak host addresses (kpage*, slabinfo, vmallocinfo). /sys is not
// mounted in the sandbox at all; its entries apply if it ever is.
var (
	// readOnlyPaths stay readable (sysctl reads are common) but are bound
	// read-only: writing a sysctl, an IRQ affinity or sysrq-trigger fails
	// with EROFS whatever the writer's uid.
	readOnlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	// maskedPaths read as empty: a file is covered by /dev/null, a
	// directory by an empty read-only tmpfs. A glob is expanded at mount
	// time (which kpage* files exist depends on the kernel).
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/kpage*",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/slabinfo", "/proc/timer_list",
		"/proc/timer_stats", "/proc/vmallocinfo",
		"/sys/devices/virtual/powercap", "/sys/firmware",
	}
)

// mountProc mounts a fresh /proc for the calling process's pid namespace
// and hides in it what readOnlyPaths and maskedPaths name. A worker calls it
// for the commands it runs: the masks are its own mounts, which a command
// (with no capability) cannot remove, and which make the kernel refuse any
// further proc mount in a namespace a command might create (a proc mount
// needs a fully visible one to exist). The init's own /proc stays plain for
// that reason: only sbx's own code runs there.
func mountProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, p := range readOnlyPaths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s read-only: %w", p, err)
		}
		if err := remountRO(p); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	for _, pat := range maskedPaths {
		matches, _ := filepath.Glob(pat)
		for _, p := range matches {
			if err := maskPath(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func maskPath(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,mode=0555"); err != nil {
			return fmt.Errorf("mask %s with an empty tmpfs: %w", p, err)
		}
		return nil
	}
	if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mask %s with /dev/null: %w", p, err)
	}
	if err := remountRO(p); err != nil {
		return fmt.Errorf("make the mask of %s read-only: %w", p, err)
	}
	return nil
}

// noLinkBelow checks that no directory on the way to target (absolute, in
// the sandbox) is a symbolic link in the new root at root: before the
// pivot a link there resolves against the host's file system, and a mount
// point made through it would be made on the host. What does not exist yet
// is made by the caller, as a directory.
func noLinkBelow(root, target string) error {
	p := root
	for _, c := range strings.Split(strings.Trim(filepath.Clean(target), "/"), "/") {
		if c == "" {
			continue
		}
		p += "/" + c
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("its path crosses %s, a symbolic link in the sandbox's root", strings.TrimPrefix(p, root))
		}
	}
	return nil
}
