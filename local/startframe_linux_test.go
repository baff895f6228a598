package local

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestStartedFrameOnlyForATerminal: a worker tells the init that a command
// runs only when the command has a terminal (its master side goes to the
// client); for any other command the worker's first frame is its end, so
// the init is not woken while the command starts. (The terminal path end to
// end: cmd/sbx's TestShellHasTerminalWithWindowSize.)
func TestStartedFrameOnlyForATerminal(t *testing.T) {
	c, peer := connPair(t)
	stdout, _ := os.CreateTemp(t.TempDir(), "out")
	iso := &workerIsolation{c: c, req: &workerExec{Fds: []string{"stdout"}}, files: []*os.File{stdout}}
	iso.Started(7)
	peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	if n, err := peer.Read(b[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the worker sent %d bytes (%v) when a command without a terminal started, want nothing", n, err)
	}
	if _, err := stdout.Stat(); err == nil {
		t.Fatal("the worker kept its copy of the command's stdout once the command held it")
	}

	master, slave, err := os.Pipe() // stands for the terminal's two sides
	if err != nil {
		t.Fatal(err)
	}
	iso = &workerIsolation{c: c, req: &workerExec{TTY: true}, master: master, slave: slave}
	iso.Started(8)
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	pc := newConn(peer)
	var r reply
	files, err := pc.readFrame(&r)
	if err != nil || !r.Started || r.Pid != 8 || len(files) != 1 {
		t.Fatalf("a terminal's command started: frame %+v with %d descriptors, %v; want started, pid 8, the master side", r, len(files), err)
	}
	closeAll(files)
}
