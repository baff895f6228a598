package hostd

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// supported: the daemon needs the peer's credentials (SO_PEERCRED).
const supported = true

// ownedByUs checks that fi belongs to this process's user.
func ownedByUs(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("no owner known")
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not %d", st.Uid, os.Getuid())
	}
	return nil
}

// peerUid is the uid of the process on the other end of c.
func peerUid(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// afterCheck, when set (by a test), runs between dialPrivate's checks and
// its connect: the window a swap of the directory would use.
var afterCheck func()

// dialPrivate connects to sock, a socket in dir, through a descriptor of dir
// opened without following a symlink and checked to be this user's and
// private (privateDir's rules on the descriptor itself): whoever can write a
// parent of dir cannot swap it for another between the check and the
// connect, which then resolves through /proc/self/fd to the very directory
// checked.
func dialPrivate(ctx context.Context, dir, sock string) (*net.UnixConn, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("%s is not a private directory (mode %o)", dir, st.Mode&0o7777)
	}
	if int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%s: owned by uid %d, not %d", dir, st.Uid, os.Getuid())
	}
	name := filepath.Base(sock)
	if filepath.Join(dir, name) != filepath.Clean(sock) {
		return nil, fmt.Errorf("%s is not directly in %s", sock, dir)
	}
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("stat %s: %w", sock, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%s is not a socket", sock)
	}
	if int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%s: owned by uid %d, not %d", sock, st.Uid, os.Getuid())
	}
	if afterCheck != nil {
		afterCheck()
	}
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
	if err != nil {
		return nil, err // ECONNREFUSED: a stale socket, its daemon gone
	}
	return c.(*net.UnixConn), nil
}
