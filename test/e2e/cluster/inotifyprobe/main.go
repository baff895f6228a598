//go:build linux

// Command inotifyprobe is uploaded into a sandbox pod by the e2e test
// TestInotifyInPod: it watches the directories named by its arguments
// with inotify, prints "ready" once the watches are set, then one line
// "<dir> <event> <name>" per event until a file named "stop" is created in
// the first directory. It exits 3 when inotify itself fails, so the test
// can tell "no inotify" from "no events".
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

func main() {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		fmt.Println("inotify_init1:", err)
		os.Exit(3)
	}
	dirs := map[int32]string{}
	for _, d := range os.Args[1:] {
		wd, err := syscall.InotifyAddWatch(fd, d, syscall.IN_CREATE|syscall.IN_MODIFY|syscall.IN_CLOSE_WRITE|
			syscall.IN_DELETE|syscall.IN_MOVED_FROM|syscall.IN_MOVED_TO|syscall.IN_ATTRIB)
		if err != nil {
			fmt.Println("inotify_add_watch", d+":", err)
			os.Exit(3)
		}
		dirs[int32(wd)] = d
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil {
			fmt.Fprintln(out, "read:", err)
			out.Flush()
			os.Exit(3)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			for _, m := range []struct {
				bit  uint32
				name string
			}{{syscall.IN_CREATE, "CREATE"}, {syscall.IN_MODIFY, "MODIFY"}, {syscall.IN_CLOSE_WRITE, "CLOSE_WRITE"},
				{syscall.IN_DELETE, "DELETE"}, {syscall.IN_MOVED_FROM, "MOVED_FROM"}, {syscall.IN_MOVED_TO, "MOVED_TO"},
				{syscall.IN_ATTRIB, "ATTRIB"}} {
				if ev.Mask&m.bit != 0 {
					fmt.Fprintln(out, dirs[ev.Wd], m.name, name)
				}
			}
			if ev.Mask&syscall.IN_CREATE != 0 && name == "stop" && dirs[ev.Wd] == os.Args[1] {
				out.Flush()
				return
			}
		}
		out.Flush()
	}
}
