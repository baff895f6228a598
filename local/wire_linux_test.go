package local

import (
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func connPair(t *testing.T) (*conn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := mk(fds[0]), mk(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return newConn(a), b
}

func openFds(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// A peer that sends descriptors its frames never claim cannot fill this
// process's descriptor table: past maxFds the connection is refused and
// what it sent is closed.
func TestWireBoundsDescriptors(t *testing.T) {
	c, peer := connPair(t)
	devnull, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	before := openFds(t)
	fds := make([]int, 64)
	for i := range fds {
		fds[i] = int(devnull.Fd())
	}
	frame := []byte(`{"op":"ping"}`)
	msg := make([]byte, 5+len(frame))
	binary.BigEndian.PutUint32(msg, uint32(len(frame)))
	msg[4] = 0 // claims none of them
	copy(msg[5:], frame)
	go func() {
		for range 10 { // 640 descriptors
			if _, _, err := peer.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
				return
			}
		}
	}()
	var r request
	var rerr error
	for range 10 {
		if _, rerr = c.readFrame(&r); rerr != nil {
			break
		}
	}
	if rerr == nil || !strings.Contains(rerr.Error(), "more than 255 descriptors") {
		t.Fatalf("err %v, want a refusal past 255 descriptors", rerr)
	}
	if after := openFds(t); after > before+maxFds {
		t.Fatalf("%d descriptors open after the refusal, %d before", after, before)
	}
}

// A frame over maxFrame is refused before it is read, on either end.
func TestWireBoundsFrame(t *testing.T) {
	c, peer := connPair(t)
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:], maxFrame+1)
	go peer.Write(hdr[:])
	var r request
	if _, err := c.readFrame(&r); err == nil || !strings.Contains(err.Error(), "over the 8388608-byte limit") {
		t.Fatalf("err %v", err)
	}
	if err := c.writeFrame(request{Op: "exec", Argv: []string{strings.Repeat("x", maxFrame)}}); err == nil {
		t.Fatal("an oversized frame was sent")
	}
}

// TestFrameReadsKeepStacksSmall: reading a frame does not grow the reading
// goroutine's stack past 64 KiB. fill's 64 KiB read buffer was a local
// array, so every goroutine that read a frame (the init's three a command,
// sbx's handler for each call) grew its stack to 128 KiB first, a copy of
// the stack each time; the buffer is pooled now.
func TestFrameReadsKeepStacksSmall(t *testing.T) {
	const n = 32
	var ready, hold sync.WaitGroup
	ready.Add(n)
	hold.Add(1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		c, peer := connPair(t)
		go func() {
			var r reply
			if err := newConn(peer).writeFrame(reply{Done: true, ExitCode: 3}); err != nil {
				t.Error(err)
			} else if _, err := c.readFrame(&r); err != nil || r.ExitCode != 3 {
				t.Errorf("read frame: %+v %v", r, err)
			}
			ready.Done()
			hold.Wait() // alive, with its stack, until measured
		}()
	}
	ready.Wait()
	runtime.ReadMemStats(&after)
	hold.Done()
	if grew := int64(after.StackInuse) - int64(before.StackInuse); grew > n*64<<10 {
		t.Fatalf("%d goroutines that read a frame hold %d KiB more of stack, %d KiB each: over 64 KiB each", n, grew>>10, grew/n>>10)
	}
}
