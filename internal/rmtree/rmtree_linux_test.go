package rmtree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The removal runs in a child process of the test binary, as an ordinary
// user (uid 65534 when the test runs as root: root's permission checks
// would pass over the directories a sandbox made unwritable) and with a
// descriptor limit far below the trees' depth.

const (
	envChild  = "RMTREE_TEST_REMOVE"
	childFds  = 256
	childUser = 65534
)

func TestMain(m *testing.M) {
	if p := os.Getenv(envChild); p != "" {
		lim := unix.Rlimit{Cur: childFds, Max: childFds}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(2)
		}
		if err := Path(p); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// removeAsUser removes p in a child as an ordinary user, within limit.
func removeAsUser(t *testing.T, p string, limit time.Duration) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cred *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		// A copy the child's user may run (the build's directory is root's).
		bin := filepath.Join(t.TempDir(), "rmtree.test")
		b, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Dir(bin), 0o755)
		self = bin
		cred = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: childUser, Gid: childUser}}
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envChild+"="+p)
	if cred != nil {
		cmd.SysProcAttr = cred
	}
	out := make(chan string, 1)
	go func() {
		b, err := cmd.CombinedOutput()
		if err != nil {
			out <- fmt.Sprintf("%v: %s", err, b)
			return
		}
		out <- ""
	}()
	select {
	case msg := <-out:
		if msg != "" {
			t.Fatalf("remove %s: %s", p, msg)
		}
	case <-time.After(limit):
		cmd.Process.Kill()
		t.Fatalf("the removal of %s took more than %v", p, limit)
	}
}

// tree is a directory the test builds for the child to remove: its parents
// searchable by the child's user, everything below given to it.
func tree(t *testing.T) (parent, top string) {
	t.Helper()
	parent = t.TempDir()
	for d := parent; d != "/"; d = filepath.Dir(d) {
		if d == os.TempDir() {
			break
		}
		os.Chmod(d, 0o755)
	}
	own(t, unix.AT_FDCWD, parent)
	top = filepath.Join(parent, "work")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, unix.AT_FDCWD, top)
	return parent, top
}

// own gives dirfd's entry name ("" for dirfd itself) to the child's user
// (as root), not following a link.
func own(t *testing.T, dirfd int, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	var err error
	if name == "" {
		err = unix.Fchown(dirfd, childUser, childUser)
	} else {
		err = unix.Fchownat(dirfd, name, childUser, childUser, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		t.Fatalf("chown %q: %v", name, err)
	}
}

// chain makes a chain of depth directories named a below dir, through
// descriptors (any depth, in time linear in it), calls at for each level
// (its descriptor and depth), and returns the deepest's descriptor.
func chain(t *testing.T, dir string, depth int, at func(fd, d int)) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for d := 1; d <= depth; d++ {
		if err := unix.Mkdirat(fd, "a", 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, "a", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = nfd
		own(t, fd, "")
		if at != nil {
			at(fd, d)
		}
	}
	return fd
}

func writeAt(t *testing.T, fd int, name, body string) {
	t.Helper()
	f, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte(body))
	unix.Close(f)
	own(t, fd, name)
}

func linkAt(t *testing.T, fd int, target, name string) {
	t.Helper()
	if err := unix.Symlinkat(target, fd, name); err != nil {
		t.Fatal(err)
	}
	own(t, fd, name)
}

// victim is a host directory outside the tree with a file, for links to
// name; check says it is untouched.
func victim(t *testing.T) (dir string, check func()) {
	dir = t.TempDir()
	f := filepath.Join(dir, "keep.txt")
	os.WriteFile(f, []byte("host\n"), 0o600)
	os.Chmod(dir, 0o700)
	return dir, func() {
		t.Helper()
		fi, err := os.Lstat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("the host directory a link named: %v %v", fi, err)
		}
		fi, err = os.Lstat(f)
		if b, _ := os.ReadFile(f); err != nil || string(b) != "host\n" || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the host file a link named: %q %v %v", b, fi, err)
		}
	}
}

func gone(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("%s is still there: %v", p, err)
	}
}

// TestDeepTreeRemoved: a chain of directories far deeper than the
// descriptor limit, with read-only and unreadable directories along it and
// at its end, and links to a host directory and file at depth, is removed
// whole, in about the time of its entries, and nothing a link names is
// touched. os.RemoveAll held one descriptor per level (EMFILE: the tree's
// end stayed on disk for good), and the chmod walk through an os.Root
// resolved every path from the top (a chain of 4000 took 97 s).
func TestDeepTreeRemoved(t *testing.T) {
	const depth = 5000
	_, top := tree(t)
	vdir, check := victim(t)
	modes := map[int]uint32{7: 0o555, 700: 0o311, 3000: 0o644, 4500: 0, depth: 0o500}
	held := map[int]uint32{}
	fd := chain(t, top, depth, func(fd, d int) {
		if d%997 == 0 {
			writeAt(t, fd, "f", "x")
			linkAt(t, fd, vdir, "dlink")
			linkAt(t, fd, filepath.Join(vdir, "keep.txt"), "flink")
		}
		if m, ok := modes[d]; ok {
			dup, err := unix.Dup(fd)
			if err != nil {
				t.Fatal(err)
			}
			held[dup] = m
		}
	})
	if err := unix.Mkdirat(fd, "locked", 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, fd, "locked")
	lfd, err := unix.Openat(fd, "locked", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, lfd, "f", "x")
	held[lfd] = 0
	unix.Close(fd)
	// The modes last, once everything below is made.
	for fd, m := range held {
		if err := unix.Fchmod(fd, m); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	removeAsUser(t, top, 60*time.Second)
	gone(t, top)
	check()
}

// TestTopItself: a top that is a link is removed, not what it names; one
// that is a file is removed; one not there is no error; one the sandbox
// made mode 000, with wide directories of odd names below, goes whole.
func TestTopItself(t *testing.T) {
	parent, top := tree(t)
	vdir, check := victim(t)
	os.Remove(top)
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	linkAt(t, pfd, vdir, "work")
	removeAsUser(t, top, 60*time.Second)
	gone(t, top)
	check()
	writeAt(t, pfd, "work", "x")
	removeAsUser(t, top, 60*time.Second)
	gone(t, top)
	removeAsUser(t, top, 60*time.Second) // not there
	if err := unix.Mkdirat(pfd, "work", 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, pfd, "work")
	fd := chain(t, top, 3, nil)
	for i := range 1200 {
		writeAt(t, fd, fmt.Sprintf("-n\nl %d\n", i), "x")
	}
	if err := unix.Mkdirat(fd, "ro", 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, fd, "ro")
	rfd, err := unix.Openat(fd, "ro", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		writeAt(t, rfd, strconv.Itoa(i), "x")
		linkAt(t, rfd, vdir, "l"+strconv.Itoa(i))
	}
	unix.Fchmod(rfd, 0o555)
	unix.Close(rfd)
	unix.Close(fd)
	os.Chmod(top, 0)
	removeAsUser(t, top, 60*time.Second)
	gone(t, top)
	check()
}
