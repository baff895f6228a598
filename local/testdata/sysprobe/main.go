// sysprobe is run inside a sandbox by the local package's tests: each
// operation makes one kernel call a hostile command would make and prints
// "<op>: ok [data]" or "<op>: <errno name>". It is built static (no cgo) and
// copied into the code dir, so no package is needed in the sandbox.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sysprobe op [args]")
		os.Exit(2)
	}
	op, args := os.Args[1], os.Args[2:]
	data, err := run(op, args)
	if err != nil {
		var en unix.Errno
		if errors.As(err, &en) {
			fmt.Printf("%s: %s\n", op, unix.ErrnoName(en))
		} else {
			fmt.Printf("%s: error %v\n", op, err)
		}
		return
	}
	fmt.Printf("%s: ok %s\n", op, data)
}

func errno(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func run(op string, args []string) (string, error) {
	switch op {
	case "keyread":
		// Link the host user's keyring (its serial from the host) into a
		// session keyring of our own, then read the key through it.
		ring, _ := strconv.Atoi(args[0])
		key, _ := strconv.Atoi(args[1])
		if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
			return "", fmt.Errorf("join a new session keyring: %w", e)
		}
		if _, err := unix.KeyctlInt(unix.KEYCTL_LINK, ring, unix.KEY_SPEC_SESSION_KEYRING, 0, 0); err != nil {
			return "", err
		}
		buf := make([]byte, 256)
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, key, buf, 0)
		if err != nil {
			return "", err
		}
		return string(buf[:min(n, len(buf))]), nil
	case "keyadd":
		id, err := unix.AddKey("user", "sbx-probe", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return strconv.Itoa(id), err
	case "unshare-user":
		return "", unix.Unshare(unix.CLONE_NEWUSER)
	case "unshare-fs":
		return "", unix.Unshare(unix.CLONE_FS)
	case "clone-user":
		pid, err := syscall.ForkExec("/proc/self/exe", []string{"sysprobe", "exit"}, &syscall.ProcAttr{
			Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER},
		})
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
		return "", err
	case "fork":
		pid, err := syscall.ForkExec("/proc/self/exe", []string{"sysprobe", "exit"}, &syscall.ProcAttr{})
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
		return "", err
	case "exit":
		return "", nil
	case "clone3":
		// Size 0 is invalid: without a filter the kernel says EINVAL and
		// nothing is cloned.
		_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
		return "", errno(e)
	case "bpf":
		// BPF_OBJ_GET of a path that does not exist: ENOENT from the kernel
		// itself, EPERM from the filter.
		path := []byte("/nonexistent-sbx-probe\x00")
		attr := make([]byte, 128)
		*(*uint64)(unsafe.Pointer(&attr[0])) = uint64(uintptr(unsafe.Pointer(&path[0])))
		_, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_OBJ_GET, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
		return "", errno(e)
	case "perf":
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Size: 1, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
		_, err := unix.PerfEventOpen(&attr, 0, -1, -1, 0)
		return "", err
	case "mount":
		// A target that does not exist: ENOENT from the kernel itself.
		return "", unix.Mount("none", "/nonexistent-sbx-probe", "tmpfs", 0, "")
	case "kexec":
		_, _, e := unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)
		return "", errno(e)
	case "userfaultfd":
		_, _, e := unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)
		return "", errno(e)
	case "open-by-handle":
		_, _, e := unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0)
		return "", errno(e)
	case "vsock":
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	case "tcp":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	case "personality":
		_, _, e := unix.Syscall(unix.SYS_PERSONALITY, 0x0040000 /* ADDR_NO_RANDOMIZE */, 0, 0)
		return "", errno(e)
	case "tiocsti":
		c := byte('x')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		return "", errno(e)
	case "i386":
		return compat32()
	case "x32":
		// x32's getpid: ENOSYS where the kernel lacks x32, EPERM from the filter.
		r, _, e := unix.RawSyscall(0x40000000|39, 0, 0, 0)
		return strconv.Itoa(int(r)), errno(e)
	case "write":
		return "", os.WriteFile(args[0], []byte("probe\n"), 0o644)
	}
	return "", fmt.Errorf("unknown op %q", op)
}
