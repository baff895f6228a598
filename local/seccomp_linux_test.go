//go:build linux

package local

import (
	"encoding/binary"
	"regexp"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data as the filter sees it. x/net/bpf's VM
// loads words big-endian, so the test lays the fields out that way: the
// program's offsets are what is checked.
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a)) // the low word first, as on a little-endian CPU
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// The expected verdicts are written out by hand from Docker's profile and
// the issue, not derived from the tables the program is built from.
func TestSeccompProgramVerdicts(t *testing.T) {
	prog, _ := seccompProgram()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("the filter does not assemble: %v", err)
	}
	const eperm, enosys, allow = 0x50000 | 1, 0x50000 | 38, 0x7fff0000
	a := uint32(auditArch)
	cases := []struct {
		name string
		data []byte
		want int
	}{
		{"keyctl", seccompData(a, unix.SYS_KEYCTL), eperm},
		{"add_key", seccompData(a, unix.SYS_ADD_KEY), eperm},
		{"request_key", seccompData(a, unix.SYS_REQUEST_KEY), eperm},
		{"bpf", seccompData(a, unix.SYS_BPF), eperm},
		{"perf_event_open", seccompData(a, unix.SYS_PERF_EVENT_OPEN), eperm},
		{"kexec_load", seccompData(a, unix.SYS_KEXEC_LOAD), eperm},
		{"kexec_file_load", seccompData(a, unix.SYS_KEXEC_FILE_LOAD), eperm},
		{"init_module", seccompData(a, unix.SYS_INIT_MODULE), eperm},
		{"finit_module", seccompData(a, unix.SYS_FINIT_MODULE), eperm},
		{"delete_module", seccompData(a, unix.SYS_DELETE_MODULE), eperm},
		{"mount", seccompData(a, unix.SYS_MOUNT), eperm},
		{"umount2", seccompData(a, unix.SYS_UMOUNT2), eperm},
		{"pivot_root", seccompData(a, unix.SYS_PIVOT_ROOT), eperm},
		{"fsopen", seccompData(a, unix.SYS_FSOPEN), eperm},
		{"move_mount", seccompData(a, unix.SYS_MOVE_MOUNT), eperm},
		{"setns", seccompData(a, unix.SYS_SETNS), eperm},
		{"open_by_handle_at", seccompData(a, unix.SYS_OPEN_BY_HANDLE_AT), eperm},
		{"userfaultfd", seccompData(a, unix.SYS_USERFAULTFD), eperm},
		{"io_uring_setup", seccompData(a, unix.SYS_IO_URING_SETUP), eperm},
		{"swapon", seccompData(a, unix.SYS_SWAPON), eperm},
		{"reboot", seccompData(a, unix.SYS_REBOOT), eperm},
		{"settimeofday", seccompData(a, unix.SYS_SETTIMEOFDAY), eperm},
		{"clock_settime", seccompData(a, unix.SYS_CLOCK_SETTIME), eperm},
		{"syslog", seccompData(a, unix.SYS_SYSLOG), eperm},
		{"acct", seccompData(a, unix.SYS_ACCT), eperm},
		{"quotactl", seccompData(a, unix.SYS_QUOTACTL), eperm},
		{"lookup_dcookie", seccompData(a, unix.SYS_LOOKUP_DCOOKIE), eperm},
		{"nfsservctl", seccompData(a, unix.SYS_NFSSERVCTL), eperm},
		{"fanotify_init", seccompData(a, unix.SYS_FANOTIFY_INIT), eperm},
		{"clone3 (so libc falls back to clone)", seccompData(a, unix.SYS_CLONE3), enosys},
		{"clone of a thread", seccompData(a, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), allow},
		{"clone for fork", seccompData(a, unix.SYS_CLONE, uint64(unix.SIGCHLD)), allow},
		{"clone with CLONE_NEWUSER", seccompData(a, unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone with CLONE_NEWNET", seccompData(a, unix.SYS_CLONE, unix.CLONE_NEWNET), eperm},
		{"unshare CLONE_NEWUSER", seccompData(a, unix.SYS_UNSHARE, unix.CLONE_NEWUSER), eperm},
		{"unshare CLONE_NEWNS", seccompData(a, unix.SYS_UNSHARE, unix.CLONE_NEWNS), eperm},
		{"unshare CLONE_NEWTIME", seccompData(a, unix.SYS_UNSHARE, 0x80), eperm},
		{"unshare CLONE_FS", seccompData(a, unix.SYS_UNSHARE, unix.CLONE_FS), allow},
		{"socket AF_INET", seccompData(a, unix.SYS_SOCKET, unix.AF_INET), allow},
		{"socket AF_UNIX", seccompData(a, unix.SYS_SOCKET, unix.AF_UNIX), allow},
		{"socket AF_NETLINK", seccompData(a, unix.SYS_SOCKET, unix.AF_NETLINK), allow},
		{"socket AF_INET6", seccompData(a, unix.SYS_SOCKET, unix.AF_INET6), allow},
		{"socket AF_VSOCK", seccompData(a, unix.SYS_SOCKET, unix.AF_VSOCK), eperm},
		{"socket AF_ALG", seccompData(a, unix.SYS_SOCKET, unix.AF_ALG), eperm},
		{"socket family 46", seccompData(a, unix.SYS_SOCKET, 46), eperm},
		{"personality query", seccompData(a, unix.SYS_PERSONALITY, 0xffffffff), allow},
		{"personality PER_LINUX", seccompData(a, unix.SYS_PERSONALITY, 0), allow},
		{"personality ADDR_NO_RANDOMIZE", seccompData(a, unix.SYS_PERSONALITY, 0x0040000), eperm},
		{"personality READ_IMPLIES_EXEC", seccompData(a, unix.SYS_PERSONALITY, 0x0400000), eperm},
		{"ioctl TIOCSTI", seccompData(a, unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm},
		{"ioctl TIOCSTI, high bits set", seccompData(a, unix.SYS_IOCTL, 0, 0xffffffff00000000|unix.TIOCSTI), eperm},
		{"ioctl TIOCLINUX", seccompData(a, unix.SYS_IOCTL, 0, unix.TIOCLINUX), eperm},
		{"ioctl TIOCGWINSZ", seccompData(a, unix.SYS_IOCTL, 1, unix.TIOCGWINSZ), allow},
		{"read", seccompData(a, unix.SYS_READ), allow},
		{"openat", seccompData(a, unix.SYS_OPENAT), allow},
		{"execve", seccompData(a, unix.SYS_EXECVE), allow},
		{"ptrace (own pid namespace)", seccompData(a, unix.SYS_PTRACE), allow},
		{"name_to_handle_at (allowed as in Docker)", seccompData(a, unix.SYS_NAME_TO_HANDLE_AT), allow},
		{"seccomp (a command may add filters)", seccompData(a, unix.SYS_SECCOMP), allow},
		{"another arch: i386", seccompData(unix.AUDIT_ARCH_I386, 0), eperm},
		{"another arch: arm32", seccompData(unix.AUDIT_ARCH_ARM, 0), eperm},
	}
	//lint:file-ignore SA4016 0x40000000|0 is the x32 bit (__X32_SYSCALL_BIT) or-ed with syscall 0 (read), spelled as the kernel builds x32 numbers
	if auditArch == unix.AUDIT_ARCH_X86_64 {
		cases = append(cases,
			struct {
				name string
				data []byte
				want int
			}{"x32 read", seccompData(a, 0x40000000|0), eperm},
			struct {
				name string
				data []byte
				want int
			}{"x32 keyctl", seccompData(a, 0x40000000|250), eperm},
			struct {
				name string
				data []byte
				want int
			}{"iopl", seccompData(a, 172), eperm},
			struct {
				name string
				data []byte
				want int
			}{"ioperm", seccompData(a, 173), eperm},
			struct {
				name string
				data []byte
				want int
			}{"uselib", seccompData(a, 134), eperm},
			struct {
				name string
				data []byte
				want int
			}{"_sysctl", seccompData(a, 156), eperm},
		)
	}
	// Every number in the tables, so that a jump the tree got wrong shows.
	for _, s := range append(append([]sysName(nil), deniedSyscalls...), archDeniedSyscalls...) {
		cases = append(cases, struct {
			name string
			data []byte
			want int
		}{"table: " + s.name, seccompData(a, s.nr), eperm})
	}
	for nr := uint32(0); nr < 500; nr++ {
		if got, _ := vm.Run(seccompData(a, nr)); got != allow && got != eperm && got != enosys {
			t.Errorf("syscall %d: verdict %#x is none of allow, EPERM, ENOSYS", nr, got)
		}
	}
	for _, c := range cases {
		got, err := vm.Run(c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: filter returns %#x, want %#x", c.name, got, c.want)
		}
	}
}

// TestDoctorReportsKernelLayers runs the real `sbx doctor`: both layers
// active, from what a real sandboxed command saw.
func TestDoctorReportsKernelLayers(t *testing.T) {
	sbx, _ := kernelTools(t)
	w := newSbxWorld(t, sbx)
	out, _ := w.run(t, "doctor", "--backend", "local")
	if !regexp.MustCompile(`(?m)^ok   seccomp: active: \d+ syscall rules for \S+ \(\d+ BPF instructions\)`).MatchString(out) {
		t.Errorf("seccomp not reported active:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^ok   Landlock: active: ABI \d+`).MatchString(out) {
		t.Errorf("Landlock not reported active:\n%s", out)
	}
}
