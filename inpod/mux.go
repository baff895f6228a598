package inpod

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
)

// The long-lived exec. Starting a process in a pod costs a whole exec (API
// server -> kubelet -> runtime), ~200 ms; so a session starts one exec of
// `sbx __inpod mux` and runs every later helper call as a stream multiplexed
// on it (yamux, with its per-stream flow control, so one slow consumer never
// stalls the others), where a call costs one message round trip and the
// start of a helper process inside the pod.
//
// On the mux's stdout the helper first writes one greeting line, muxGreeting,
// then speaks yamux over stdin/stdout as the server. Each stream the host
// opens begins with one line naming the helper sub-command ("serve", or
// "kill ID"); the mux runs the helper (its own binary) as a child with that
// sub-command, the stream as the child's stdin and stdout, so each call is
// exactly what one exec of `sbx __inpod serve` was. When the mux ends (the
// exec's stream broke, the sbx on the host went away), it kills every
// command still running: a dead session leaves nothing behind in the pod.

// The mux's first line of output proves which helper answers: its
// protocol version and the SHA-256 of its own executable ("sbx-inpod/2 mux
// HASH"), so that a pod keeps a helper only when it is the very build the
// host would upload (a persistent pod outlives sbx upgrades).
func greeting() string { return Version + " mux " + SelfHash() + "\n" }

var selfHash = sync.OnceValue(func() string {
	// The running executable itself where Linux shows it: its path (in
	// RunDir, which a command can write) may name something else by now,
	// even a fifo whose open would wait.
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		exe, err := os.Executable()
		if err != nil {
			return "unknown"
		}
		if f, err = os.Open(exe); err != nil {
			return "unknown"
		}
	}
	defer f.Close()
	h, err := Hash(f)
	if err != nil {
		return "unknown"
	}
	return h
})

// SelfHash is the SHA-256 of this program's executable.
func SelfHash() string { return selfHash() }

// Hash is the SHA-256 of what r holds, hex.
func Hash(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// greetTimeout bounds the wait for the helper's greeting: an exec that
// started but never runs the helper must not hang the command.
var greetTimeout = time.Minute

var errSilent = errors.New("silent")

// ErrNoHelper says that what answered at the helper path is not this
// version's helper (absent, another version, or not a helper at all); the
// host uploads it and tries again.
var ErrNoHelper = errors.New("no helper of this version in the sandbox")

func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.MaxStreamWindowSize = 1 << 20
	c.ConnectionWriteTimeout = time.Minute
	c.LogOutput = io.Discard
	return c
}

// pipeConn joins a reader and a writer into the connection yamux wants.
type pipeConn struct {
	io.Reader
	io.Writer
	close func() error
}

func (p pipeConn) Close() error { return p.close() }

// muxSubcommand parses a stream's first line into the helper's arguments.
// Only the helper's own sub-commands run: the line comes from the host, but
// the mux is no general way to start programs.
func muxSubcommand(line string) ([]string, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 1 && (f[0] == "serve" || f[0] == "version"):
		return f, nil
	case len(f) == 2 && f[0] == "kill" && !strings.ContainsAny(f[1], "/."):
		return f, nil
	case len(f) == 2 && f[0] == "dial":
		if _, err := dialPort(f[1]); err == nil {
			return f, nil
		}
	}
	return nil, fmt.Errorf("mux: unknown request %q", line)
}

// readLine reads one line from r without reading past it.
func readLine(r io.Reader, max int) (string, error) {
	var b []byte
	var c [1]byte
	for len(b) < max {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return "", err
		}
		if c[0] == '\n' {
			return string(b), nil
		}
		b = append(b, c[0])
	}
	return "", fmt.Errorf("line longer than %d bytes", max)
}

// Mux serves helper calls over in/out until in ends. It returns the
// process's exit status.
func Mux(in io.Reader, out io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbx __inpod mux:", err)
		return 1
	}
	if _, err := io.WriteString(out, greeting()); err != nil {
		return 1
	}
	sess, err := yamux.Server(pipeConn{in, out, func() error { return nil }}, yamuxConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbx __inpod mux:", err)
		return 1
	}
	var (
		mu       sync.Mutex
		children = map[int]bool{}
		ended    bool // the host is gone: no child starts any more
		wg       sync.WaitGroup
	)
	// start starts the helper with args, its stdin and stdout pipes of
	// this process's, and counts it among the children.
	start := func(args []string) (*child, error) {
		cmd := exec.Command(self, append([]string{"__inpod"}, args...)...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			stdin.Close()
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return nil, errors.New("the mux is ending")
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		children[cmd.Process.Pid] = true
		return &child{cmd: cmd, stdin: stdin, stdout: stdout}, nil
	}
	// A program start in a pod is most of a helper call's cost (a Go
	// runtime's start, 15-20 ms under gVisor): one "serve" child is
	// started ahead and waits for its request on stdin, so a call finds
	// it started. The next spare starts when the call that took one ends.
	spare := make(chan *child, 1)
	startSpare := func() {
		if c, err := start([]string{"serve"}); err == nil {
			spare <- c
		}
	}
	go startSpare()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			line, err := readLine(st, 256)
			if err != nil {
				return
			}
			args, err := muxSubcommand(line)
			if err != nil {
				fmt.Fprintln(st, err) // not a frame: the host's reader reports a protocol error
				return
			}
			if args[0] == "dial" {
				serveDial(st, args[1])
				return
			}
			var c *child
			if args[0] == "serve" {
				select {
				case c = <-spare:
					// The next one once this call is done: starting it
					// beside the call slows the call (a pod's CPUs are few).
					defer func() { go startSpare() }()
					if exited(c.cmd.Process.Pid) {
						// Killed while it waited (the OOM killer,
						// the sandbox's own commands): reaped, and
						// the call gets a child of its own.
						c.stdin.Close()
						c.cmd.Wait()
						mu.Lock()
						delete(children, c.cmd.Process.Pid)
						mu.Unlock()
						c = nil
					}
				default:
				}
			}
			if c == nil {
				if c, err = start(args); err != nil {
					fmt.Fprintln(os.Stderr, "sbx __inpod mux:", err)
					return
				}
			}
			// The stream's input goes to the child until the host closes its
			// side; a child that exits first just stops taking it.
			go func() {
				io.Copy(c.stdin, st)
				c.stdin.Close()
			}()
			io.Copy(st, c.stdout)
			c.cmd.Wait()
			mu.Lock()
			delete(children, c.cmd.Process.Pid)
			mu.Unlock()
		}()
	}
	// The host is gone: nothing it started may outlive it (the spare
	// included).
	mu.Lock()
	ended = true
	for pid := range children {
		killTree(pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	mu.Unlock()
	sess.Close()
	wg.Wait()
	return 0
}

// child is a helper process the mux started, with its stdio.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
}

// MuxClient is the host's end of a mux.
type MuxClient struct {
	sess *yamux.Session
	stop context.CancelFunc
	done chan struct{}
	err  error // why the exec ended; read after done
}

// StartMux starts the mux through run, a long-lived exec of the helper at
// helperPath, and returns when the helper has greeted. The exec lasts until
// Close, or until it breaks (Closed then reports true). An error wrapping
// ErrNoHelper means the helper there is absent or of another version.
func StartMux(ctx context.Context, run StreamFunc, helperPath, wantHash string) (*MuxClient, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ectx, stop := context.WithCancel(context.Background())
	m := &MuxClient{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		err := run(ectx, []string{helperPath, "__inpod", "mux"}, inR, outW)
		if err == nil {
			err = errors.New("the helper's exec ended")
		}
		m.err = err
		outW.CloseWithError(err)
		// The exec's stdin copier may still be reading: it gets a clean end
		// (a closed reader would make client-go log an error).
		inW.Close()
	}()
	br := bufio.NewReaderSize(outR, 64<<10)
	greeted := make(chan error, 1)
	go func() {
		line, err := readGreeting(br)
		switch {
		case err != nil && line == "":
			greeted <- err
		case !greetingOK(line, wantHash):
			greeted <- fmt.Errorf("%w: it answered %q", ErrNoHelper, strings.TrimSpace(line))
		default:
			greeted <- nil
		}
	}()
	var err error
	greetWait := time.NewTimer(greetTimeout)
	defer greetWait.Stop()
	select {
	case err = <-greeted:
	case <-ctx.Done():
		err = ctx.Err()
	case <-greetWait.C:
		err = errSilent
	}
	if err != nil {
		stop()
		inW.Close()
		outR.Close() // what the pod still sends is not read
		<-m.done
		if err == errSilent {
			return nil, fmt.Errorf("the helper's exec started but the helper did not answer within %s", greetTimeout)
		}
		if !errors.Is(err, ErrNoHelper) && ctx.Err() == nil {
			// The exec ended without a greeting: a missing binary makes the
			// runtime fail it (exit 126/127), which is no helper either.
			err = fmt.Errorf("%w: %v", ErrNoHelper, m.err)
		}
		return nil, err
	}
	// Closing the session ends the helper's input: the mux kills what still
	// runs and exits, and the exec ends by itself (cancelling it instead
	// makes client-go log its copiers' errors); yamux reads on until then.
	// An exec that does not end soon is cancelled.
	closeConn := func() error {
		time.AfterFunc(3*time.Second, stop)
		return inW.Close()
	}
	sess, err := yamux.Client(pipeConn{br, inW, closeConn}, yamuxConfig())
	if err != nil {
		stop()
		return nil, err
	}
	m.sess = sess
	go func() {
		select {
		case <-m.done:
			sess.Close()
		case <-sess.CloseChan():
			m.waitOrStop()
		}
	}()
	return m, nil
}

// waitOrStop waits a little for the exec to end after its input did, then
// cancels it.
func (m *MuxClient) waitOrStop() {
	select {
	case <-m.done:
	case <-time.After(3 * time.Second):
		m.stop()
		<-m.done
	}
}

// maxGreeting bounds the greeting line the host reads from the pod: a
// protocol name, "mux" and a hex SHA-256 fit in well under it. Past it the
// answer is no helper, and nothing more is read.
const maxGreeting = 256

// readGreeting reads the greeting line, at most maxGreeting bytes of it.
func readGreeting(br *bufio.Reader) (string, error) {
	var b []byte
	for len(b) < maxGreeting {
		c, err := br.ReadByte()
		if err != nil {
			return string(b), err
		}
		b = append(b, c)
		if c == '\n' {
			return string(b), nil
		}
	}
	return string(b), nil // no newline: greetingOK refuses it
}

// greetingOK accepts this protocol version's greeting, from the build
// whose hash is want ("" accepts any build).
func greetingOK(line, want string) bool {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != Version || f[1] != "mux" || !strings.HasSuffix(line, "\n") {
		return false
	}
	return want == "" || f[2] == want
}

// Closed reports whether the mux has ended.
func (m *MuxClient) Closed() bool { return m.sess.IsClosed() }

// Close ends the mux and its exec; the helper kills what still runs.
func (m *MuxClient) Close() error {
	m.sess.Close()
	m.waitOrStop()
	return nil
}

// Run is a StreamFunc that runs a helper call (argv is helperPath, "__inpod",
// sub-command...) as a stream of the mux instead of an exec of its own.
func (m *MuxClient) Run(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	line, err := helperLine(argv)
	if err != nil {
		return err
	}
	st, err := m.sess.OpenStream()
	if err != nil {
		return fmt.Errorf("open a stream on the helper's exec: %w", err)
	}
	defer st.Close()
	// A cancelled call stops reading at once; the command itself is killed
	// by the caller (inpod.Exec sends "kill ID" on another stream).
	stopAfter := context.AfterFunc(ctx, func() { st.SetReadDeadline(time.Now()) })
	defer stopAfter()
	err = converse(st, st.Close, line, stdin, stdout)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil && m.sess.IsClosed() {
		<-m.done
		return fmt.Errorf("the helper's exec ended: %v", m.err)
	}
	if err != nil {
		return fmt.Errorf("the helper's exec: %w", err)
	}
	return nil
}

// helperLine is a stream's first line for a helper call (argv is
// helperPath, "__inpod", sub-command...).
func helperLine(argv []string) (string, error) {
	if len(argv) < 3 || argv[1] != "__inpod" {
		return "", fmt.Errorf("not a helper call: %q", argv)
	}
	return strings.Join(argv[2:], " "), nil
}

// converse is one helper call over a byte stream: the request line, then
// stdin (the stream half-closed by closeWrite at its end), while what comes
// back goes to stdout until the other side ends.
func converse(rw io.ReadWriter, closeWrite func() error, line string, stdin io.Reader, stdout io.Writer) error {
	if _, err := io.WriteString(rw, line+"\n"); err != nil {
		return err
	}
	go func() {
		if stdin != nil {
			io.Copy(rw, stdin)
		}
		closeWrite() // the other side sees the end of its input
	}()
	_, err := io.Copy(stdout, rw)
	return err
}

// dialPort parses the port of a "dial PORT" request: decimal digits only,
// 1 to 65535.
func dialPort(f string) (int, error) {
	if f == "" || len(f) > 5 || strings.TrimLeft(f, "0123456789") != "" || f[0] == '0' {
		return 0, fmt.Errorf("bad port %q", f)
	}
	n, err := strconv.Atoi(f)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port %q", f)
	}
	return n, nil
}

// dialTimeout bounds the helper's connect to a port on the pod's loopback.
const dialTimeout = 10 * time.Second

// serveDial connects to 127.0.0.1:port inside the sandbox (from the
// helper, which runs in the sandbox's own network stack: under gVisor the
// kubelet's port-forward, which dials the pod's network namespace from the
// node, does not reach it) and copies the stream both ways. The first line
// back is "ok" or "error: why".
func serveDial(st net.Conn, port string) {
	n, _ := dialPort(port)
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n)), dialTimeout)
	if err != nil {
		fmt.Fprintf(st, "error: %v\n", err)
		return
	}
	defer c.Close()
	if _, err := io.WriteString(st, "ok\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(c, st)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(done)
	}()
	io.Copy(st, c)
	st.Close()
	<-done
}

// Dial connects, through the helper, to 127.0.0.1:port inside the sandbox.
// The connection is a stream of the mux; closing it ends that connection
// only.
func (m *MuxClient) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range (1 to 65535)", port)
	}
	st, err := m.sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("open a stream on the helper's exec: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { st.SetReadDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(st, "dial %d\n", port); err != nil {
		st.Close()
		return nil, fmt.Errorf("ask the helper to connect to port %d: %w", port, err)
	}
	line, err := readLine(st, 512)
	if err != nil {
		st.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ask the helper to connect to port %d: %w", port, err)
	}
	if line != "ok" {
		st.Close()
		return nil, fmt.Errorf("connect to the sandbox's port %d: %s", port, strings.TrimPrefix(line, "error: "))
	}
	st.SetReadDeadline(time.Time{})
	return dialConn{st}, nil
}

// dialConn is a mux stream as a connection; CloseWrite ends what goes to
// the sandbox's server while its answer still comes back.
type dialConn struct{ *yamux.Stream }

// CloseWrite half-closes the stream (yamux's Close sends FIN and still
// reads what the other side sends).
func (c dialConn) CloseWrite() error { return c.Stream.Close() }
