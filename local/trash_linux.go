package local

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbx-sh/sbx/internal/rmtree"
)

// A released session's workspace, removed after sbx has answered: the
// session renames it into its trash dir and hands it here
// (session/release.go). The remover is this binary again (stage "rmtree"),
// detached (its own session, no terminal, no stdio), given the trash dir
// and the entry's lock as descriptors: it removes only that one entry
// beneath that directory, through an os.Root (no link followed out of it),
// and holds the lock until done, so that the next sbx leaves it alone
// while it runs and removes what it left if it was killed.

const (
	fdTrashDir  = 3
	fdTrashLock = 4
)

// ioprio_set(2)'s constants (linux/ioprio.h).
const (
	ioprioWhoPgrp    = 2
	ioprioClassIdle  = 3
	ioprioClassShift = 13
)

// lowerPriority puts the remover out of the way of what the user waits
// for (the next session placing its tree, its commands): the lowest CPU
// priority and the idle I/O class, for every thread of its process group
// (its own: it runs in a session of its own; a thread's nice is its own on
// Linux, and threads made later take their maker's). Best effort: a kernel
// that refuses either leaves the default.
func lowerPriority() {
	unix.Setpriority(unix.PRIO_PGRP, 0, 19)
	unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoPgrp, 0, ioprioClassIdle<<ioprioClassShift)
}

// RemoveLater starts the remover of trash's entry name and returns.
func (p *Provider) RemoveLater(trash *os.File, name string, lock *os.File) error {
	if err := checkTrashName(name); err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"sbx-rmtree", name},
		Env:         []string{envStage + "=rmtree"},
		Dir:         "/",
		ExtraFiles:  []*os.File{trash, lock}, // fdTrashDir, fdTrashLock
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the workspace's remover: %w", err)
	}
	// Reaped here when this process lives on (sbx-mcp); an sbx that exits
	// leaves it to finish on its own.
	go cmd.Wait()
	return nil
}

func checkTrashName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("remove trash entry %q: not a single name", name)
	}
	return nil
}

// runRemove is the remover's stage.
func runRemove() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "sbx rmtree: want one trash entry")
		return 2
	}
	name := os.Args[1]
	lowerPriority()
	if err := checkTrashName(name); err != nil {
		fmt.Fprintln(os.Stderr, "sbx rmtree:", err)
		return 2
	}
	if err := removeBeneath(os.NewFile(fdTrashDir, "trash"), name); err != nil {
		fmt.Fprintln(os.Stderr, "sbx rmtree:", err)
		return 1
	}
	return 0
}

// removeBeneath removes dir's entry name and all below it, never leaving
// dir (internal/rmtree: no link followed, a directory the sandbox made
// unwritable or unreadable made its owner's again, any depth in time
// linear in the entries).
func removeBeneath(dir *os.File, name string) error {
	err := rmtree.Beneath(int(dir.Fd()), name)
	// dir's finalizer would close the descriptor while it is still used.
	runtime.KeepAlive(dir)
	return err
}
