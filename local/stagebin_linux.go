//go:build linux

package local

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/sandbox"
)

// The stages the host starts (setup, and with it the init and its workers;
// egress) run the small sbx-sandbox binary (cmd/sbx-sandbox, which links
// only this package) when it is there and is the same build as the running
// sbx, else this binary through /proc/self/exe as before. sbx links
// client-go and the MCP SDK: a start of it costs milliseconds of package
// init and megabytes of heap that every sandbox process would carry.
//
// The file is checked through a descriptor opened without following a link,
// and that descriptor is what the stage executes (/proc/self/fd/N in the
// child), so a swap of the path between the check and the exec starts
// nothing else: the inode checked is the inode run.

// envExeFd tells a stage started through /proc/self/fd/N which descriptor
// held its binary, so that it closes it first thing.
const envExeFd = "SBX_LOCAL_EXE_FD"

var stageBin struct {
	once sync.Once
	f    *os.File // nil: /proc/self/exe
	path string
}

// stageExe decides once per process which binary the host-started stages
// run, logging why at debug level, and returns the open file (nil for
// /proc/self/exe).
func stageExe(log *slog.Logger) *os.File {
	stageBin.once.Do(func() {
		path, explicit := os.Getenv(EnvSandboxBin), true
		if path == "" {
			explicit = false
			exe, err := os.Executable()
			if err != nil {
				logDebug(log, "sandbox stages run this binary", "why", fmt.Sprintf("cannot find this executable: %v", err))
				return
			}
			path = filepath.Join(filepath.Dir(exe), SandboxBinName)
		}
		f, err := openStageBin(path, explicit)
		if err != nil {
			logDebug(log, "sandbox stages run this binary (/proc/self/exe)", "why", err.Error())
			return
		}
		stageBin.f, stageBin.path = f, path
		logDebug(log, "sandbox stages run "+SandboxBinName, "path", path)
	})
	return stageBin.f
}

func logDebug(log *slog.Logger, msg string, args ...any) {
	if log != nil {
		log.Debug(msg, args...)
	}
}

// stageFor is the binary the stages of a sandbox with mounts run (nil:
// /proc/self/exe): stageExe's, unless it lies below a directory the
// sandbox can write (a code dir, whose changes the sync writes back to the
// host as the user's own files, its workspace, a cache). There the
// sandbox could put a file of its own at the name, and the owner, mode
// and build checks would pass it: the owner is the user's after the pull-
// back, the mode the sandbox's choice, and the build information only
// data in the file, which a patched copy of the real one keeps. The setup
// stage runs it with capabilities in the sandbox's new namespaces, before
// the root is built, and the egress stage on the host.
func stageFor(log *slog.Logger, mounts []sandbox.Mount) *os.File {
	f := stageExe(log)
	if f == nil {
		return nil
	}
	dir := filepath.Dir(stageBin.path)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for _, m := range mounts {
		if m.ReadOnly {
			continue
		}
		for _, p := range []string{m.Source, m.Target} {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			if within(p, dir) {
				logDebug(log, "sandbox stages run this binary (/proc/self/exe)", "why",
					fmt.Sprintf("%s lies in %s, which the sandbox can write", stageBin.path, p))
				return nil
			}
		}
	}
	return f
}

// commandFor is the program path and the extra files of a stage started
// with extra as its ExtraFiles, for the binary open as f (nil:
// /proc/self/exe): the verified binary rides along as the last extra file
// and is executed by its number in the child, where Go has put it
// (ExtraFiles[i] is descriptor 3+i there). It also returns the environment
// entry that tells the stage which descriptor to close.
func commandFor(f *os.File, extra []*os.File) (path string, files []*os.File, env []string) {
	if f == nil {
		// The entry still overrides one the host's environment might carry
		// into the egress stage.
		return "/proc/self/exe", extra, []string{envExeFd + "="}
	}
	fd := 3 + len(extra)
	files = append(append([]*os.File(nil), extra...), f)
	return "/proc/self/fd/" + strconv.Itoa(fd), files, []string{envExeFd + "=" + strconv.Itoa(fd)}
}

// closeStageExe closes the descriptor a stage's binary came in on (see
// commandFor): the stage does not need it, and nothing it starts may
// inherit it.
func closeStageExe() {
	v := os.Getenv(envExeFd)
	if v == "" {
		return
	}
	os.Unsetenv(envExeFd)
	if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
		unix.Close(fd)
	}
}

// openStageBin opens path and checks that it may run as a sandbox stage:
// a regular file (no link) owned by root or this user in a directory owned
// by root or this user, neither writable by group or others, and the same
// build as this binary (sameBuild). The checks of the file are made on the
// descriptor returned.
func openStageBin(path string, explicit bool) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s=%q is not an absolute path", EnvSandboxBin, path)
	}
	dir := filepath.Dir(path)
	var dst unix.Stat_t
	if err := unix.Stat(dir, &dst); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := ownedSafely(dir, &dst, unix.S_IFDIR); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: name the file itself", path)
		}
		return nil, fmt.Errorf("%s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := ownedSafely(path, &st, unix.S_IFREG); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&0o111 == 0 {
		f.Close()
		return nil, fmt.Errorf("%s is not executable", path)
	}
	// As root, the sandbox runs as an unprivileged host uid (hostids_linux.go),
	// and the init starts each worker from this file as that uid.
	if os.Geteuid() == 0 && st.Mode&0o001 == 0 {
		f.Close()
		return nil, fmt.Errorf("%s is not executable by others (mode %#o), which the sandbox's own host uid needs: chmod o+x it", path, st.Mode&0o7777)
	}
	// Back to blocking mode (O_NONBLOCK only kept the open of a FIFO from
	// hanging before the type check).
	if err := unix.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, err
	}
	theirs, err := buildinfo.Read(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s has no Go build information (%v): not an sbx-sandbox", path, err)
	}
	ours, ok := debug.ReadBuildInfo()
	if !ok {
		f.Close()
		return nil, errors.New("this binary has no build information to compare with")
	}
	if err := sameBuild(ours, theirs, explicit); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is another build than this sbx: %w", path, err)
	}
	return f, nil
}

// ownedSafely refuses what is not of type typ (unix.S_IFDIR, S_IFREG), or
// is owned by another user than root or this one, or is writable by group
// or others: any of those could put another program in the file, and the
// setup stage runs it with capabilities in the sandbox's namespaces.
func ownedSafely(path string, st *unix.Stat_t, typ uint32) error {
	if st.Mode&unix.S_IFMT != typ {
		what := "a regular file"
		if typ == unix.S_IFDIR {
			what = "a directory"
		}
		return fmt.Errorf("%s is not %s", path, what)
	}
	if uid := int(st.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor this user (%d)", path, uid, os.Geteuid())
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %#o): chmod go-w it", path, st.Mode&0o7777)
	}
	return nil
}

// sameBuild says why other (an sbx-sandbox's build information) is not the
// same build as ours, or nil: the same Go version, main module path and
// version, the same build settings (vcs.revision and vcs.time among them:
// -ldflags, -tags and the rest too, which change what the binary does
// without changing its revision), and neither built from a modified
// tree (a rule an explicit SBX_SANDBOX_BIN lifts: the user said which
// binary). A development build without a recorded revision identifies
// nothing and is refused unless explicit.
func sameBuild(ours, other *debug.BuildInfo, explicit bool) error {
	if ours.GoVersion != other.GoVersion {
		return fmt.Errorf("built with %s, sbx with %s", other.GoVersion, ours.GoVersion)
	}
	if ours.Main.Path != other.Main.Path {
		return fmt.Errorf("main module %q, sbx's %q", other.Main.Path, ours.Main.Path)
	}
	if ours.Main.Version != other.Main.Version {
		return fmt.Errorf("module version %q, sbx's %q", other.Main.Version, ours.Main.Version)
	}
	a, b := settings(ours), settings(other)
	// Every build setting (flags, tags, cgo, GOARCH, vcs.revision and
	// vcs.time, ...) but vcs.modified, judged below.
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if k != "vcs.modified" && a[k] != b[k] {
				return fmt.Errorf("build setting %s is %q, sbx's %q", k, b[k], a[k])
			}
		}
	}
	if explicit {
		return nil
	}
	if a["vcs.modified"] == "true" || b["vcs.modified"] == "true" {
		return errors.New("built from a modified tree (vcs.modified=true), whose builds cannot be told apart: set " + EnvSandboxBin + " to use it anyway")
	}
	if a["vcs.revision"] == "" && (ours.Main.Version == "" || ours.Main.Version == "(devel)") {
		return errors.New("a development build without a recorded revision: set " + EnvSandboxBin + " to use it anyway")
	}
	return nil
}

func settings(bi *debug.BuildInfo) map[string]string {
	m := map[string]string{}
	for _, s := range bi.Settings {
		m[s.Key] = s.Value
	}
	return m
}
