package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/sbx-sh/sbx/sandbox"
)

// How a command runs in the pod (pods/exec has no working directory, no
// environment and no fd 3, and a killed stream does not kill the process):
//
// wrapperScript runs under the pod's /bin/sh (busybox ash is enough). It
// looks the program up as internal/runner does (on the PATH of cmd.Env, else
// on sandbox.DefaultPath; not found exits 127), starts it in a session of its
// own (setsid; `set -m` where there is none) with exactly cmd.Env (env -i),
// in cmd.Dir, with fd 3 going to a file, records the session id and its own
// pid in $TMPDIR/.sbx-exec/<id>.pid and waits. When the command has exited it
// kills what the command left running in its session (as the local backend's
// per-command pid namespace does; it also keeps a leftover that holds stdout
// from stalling the exec stream), then writes a marker (RS, a random token
// per command, RS), one byte that says whether the command started in
// cmd.DirFallback (1) or in cmd.Dir (0), and the fd 3 file to stdout. Exec
// splits that trailer off the stdout stream (fd3Splitter), hands the fd 3
// bytes to cmd.Fd3 and the byte to Result.FellBack. When cmd.Stdout
// and cmd.Stderr are one writer, the wrapper merges stderr into stdout in the
// pod, so their order is exact. When a stdin was given, the wrapper reads
// what the command left of it to its end (a cat in the background, after
// the trailer): the container runtime ends an exec only once its stdin has
// been copied, so a command that reads none of a large stdin would keep its
// exec open for ever.
//
// A timeout or a cancellation runs killTree: a second exec of killScript.
// Both use killFunc.
//
// The wrapper is the fallback for a pod that no helper can run in (sbx has
// no static helper binary to upload) and a command without a sync: every
// other command goes through the in-pod helper, whose run is the one the
// local backend's worker has too (internal/runner). The wrapper keeps to the
// same contract (sandboxtest), exit codes and signal names
// (sandbox.SignalName) included; a working directory that cannot be entered
// exits 125.
//
// killFunc kills the process tree of a command, given its session id and,
// from killScript, the wrapper's pid and the command's fd 3 file: every
// process in the command's session, every process that holds the command's
// output pipes (the wrapper's stdout and stderr, when they are pipes) or its
// fd 3 file (double-forked daemons that left the session, which would keep
// the exec stream open; only from killScript: the wrapper's cleanup after a
// normal exit skips that scan to keep a command's overhead low), and every
// descendant of those, each stopped as it is found (so nothing forks away)
// and then killed. Nothing marks the command's processes in their
// environment: a command's environment is exactly cmd.Env. It uses shell
// builtins only.
const killFunc = `sbx_kill() {
  sid=$1 wp=$2 f3=$3
  kill -STOP "$sid" 2>/dev/null
  pids=" $sid "
  if [ -n "$wp" ]; then
    o1= o2=
    [ -p "/proc/$wp/fd/1" ] && o1=/proc/$wp/fd/1
    [ -p "/proc/$wp/fd/2" ] && o2=/proc/$wp/fd/2
    for p in /proc/[0-9]*; do
      q=${p#/proc/}
      case " $wp $$ $pids" in *" $q "*) continue ;; esac
      for x in "$p"/fd/*; do
        if [ "$x" -ef "$f3" ] || { [ -n "$o1" ] && [ "$x" -ef "$o1" ]; } || { [ -n "$o2" ] && [ "$x" -ef "$o2" ]; }; then
          kill -STOP "$q" 2>/dev/null; pids="$pids$q "; break
        fi
      done
    done
  fi
  n=0
  while [ $n -lt 10 ]; do
    new=""
    for p in /proc/[0-9]*; do
      q=${p#/proc/}
      case "$pids" in *" $q "*) continue ;; esac
      read -r s 2>/dev/null <"$p/stat" || continue
      s=${s##*\)}
      set -- $s
      hit=""
      [ "$4" = "$sid" ] && hit=1
      case "$pids" in *" $2 "*) hit=1 ;; esac
      [ -n "$hit" ] && { kill -STOP "$q" 2>/dev/null; new="$new$q "; }
    done
    [ -n "$new" ] || break
    pids="$pids$new"
    n=$((n+1))
  done
  # After a normal exit the leader is gone (its pid may be reused): kill it
  # only from killScript, where it still runs.
  [ -z "$wp" ] && [ "$pids" = " $sid " ] || kill -KILL $pids 2>/dev/null
}
`

// wrapperScript's arguments: the exec id, the directory, merge (1: stderr
// into stdout), the marker, stdin (1: one was given), the lookup path, the
// number of environment entries, the number of argv entries, fd 3 (1: the
// command gets one; else it is closed), fd 4's bytes as a printf format of
// octal escapes ("" closes it), then the entries, the argv and the fallback
// argv (sandbox.Cmd.Fallback: run instead where the argv's program is an
// absolute path that is not an executable file). The command line it evals
// names positional parameters only, never their values.
const wrapperScript = killFunc + `id=$1 dir=$2 merge=$3 mark=$4 in=$5 lp=$6 ne=$7 na=$8 w3=$9 f4=${10} fb=${11}; shift 11
d=${TMPDIR:-/tmp}/.sbx-exec
[ -d "$d" ] || { mkdir -p "$d"; chmod 700 "$d"; } 2>/dev/null
f=$d/$id
[ "$merge" = 1 ] && exec 2>&1
fell=0
if [ -n "$fb" ] && ! [ -d "$dir" ]; then printf 'sbx: %s no longer exists; running in %s\n' "$dir" "$fb" >&2; dir=$fb fell=1; fi
cd "$dir" || { printf '\036%s\036%s' "$mark" 0; exit 125; }
a=$((ne+1)) n=$na
eval "prog=\${$a}"
if [ $# -gt $((ne+na)) ]; then
  case $prog in /*)
    if ! { [ -f "$prog" ] && [ -x "$prog" ]; }; then a=$((ne+na+1)) n=$(($#-ne-na)); eval "prog=\${$a}"; fi ;;
  esac
fi
case $prog in
*/*) ;;
*)
  set -f; o=$IFS; IFS=:; found=
  for x in $lp; do
    [ -n "$x" ] || x=.
    if [ -f "$x/$prog" ] && [ -x "$x/$prog" ]; then found=$x/$prog; break; fi
  done
  IFS=$o; set +f
  if [ -z "$found" ]; then
    printf '%s: command not found\n' "$prog" >&2
    printf '\036%s\036%s' "$mark" "$fell"; exit 127
  fi
  prog=$found ;;
esac
c="env -i" i=0
while [ $i -lt "$ne" ]; do i=$((i+1)); c="$c \"\${$i}\""; done
[ -n "$fb" ] && c="$c \"PWD=\$dir\""
c="$c \"\$prog\"" i=$a
while [ $i -lt $((a+n-1)) ]; do i=$((i+1)); c="$c \"\${$i}\""; done
r3='3>&-' r4='4<&-'
[ "$w3" = 1 ] && r3='3>"$f.fd3"'
[ -n "$f4" ] && { printf "$f4" >"$f.fd4"; r4='4<"$f.fd4"'; }
exec 5<&0
if command -v setsid >/dev/null 2>&1; then
  eval "setsid $c <&5 $r3 $r4 5<&- &"
else
  set -m; eval "$c <&5 $r3 $r4 5<&- &"
fi
pid=$!
echo "$pid $$" >"$f.pid"
exec 5<&-
wait $pid; rc=$?
sbx_kill $pid
printf '\036%s\036%s' "$mark" "$fell"
[ -s "$f.fd3" ] && head -c 4098 "$f.fd3"
rm -f "$f.fd3" "$f.fd4" "$f.pid"
# (a background list's stdin is /dev/null before its redirections: hence fd 5)
[ "$in" = 1 ] && { exec 5<&0; cat <&5 >/dev/null 2>&1 5<&- & }
exit $rc`

// killScript kills the tree of the running command whose exec id is $1,
// then waits (at most 3 s) for the command's wrapper to end: it is not
// killed (it reports the command's end), and until it has ended a
// cancelled command's wrapper was still seen running after the kill
// returned (under gVisor, in the e2e's CancelKillsTree).
const killScript = killFunc + `f=${TMPDIR:-/tmp}/.sbx-exec/$1
[ -r "$f.pid" ] || exit 0
read -r sid wp <"$f.pid" || exit 0
sbx_kill "$sid" "$wp" "$f.fd3"
i=0
while [ $i -lt 300 ]; do
  read -r s 2>/dev/null <"/proc/$wp/stat" || break
  s=${s##*\)}
  set -- $s
  [ "$1" = Z ] && break
  sleep 0.01 2>/dev/null || break
  i=$((i+1))
done
exit 0`

// ttyScript runs a command on the exec's terminal: in cmd.Dir with exactly
// cmd.Env, as the session leader the runtime made it (so job control works).
const ttyScript = `cd "$1" || exit 125; shift; exec env -i "$@"`

func randomID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Exec runs cmd in the sandbox's pod: a terminal session as an exec of its
// own (ttyScript); any other command through the in-pod helper (helper.go),
// or, when sbx has no helper to upload and the command needs no sync, as an
// exec of wrapperScript.
func (s *Sandbox) Exec(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	if len(cmd.Argv) == 0 {
		return sandbox.Result{}, errors.New("exec: empty argv")
	}
	s.mu.Lock()
	released := s.released
	s.mu.Unlock()
	if released {
		return sandbox.Result{}, fmt.Errorf("%w: sandbox %s was released", sandbox.ErrLost, s.claim)
	}
	if why := s.goneReason(); why != "" {
		// Nothing ran: the engine may claim a new sandbox and run it there.
		return sandbox.Result{}, fmt.Errorf("%w: %v", sandbox.ErrUnreachable, lostError(why, errors.New("seen by the pod watch"), false))
	}
	if s.relay != "" {
		// The relay renews the claim while calls come.
	} else if err := s.Renew(ctx); err != nil {
		if errors.Is(err, sandbox.ErrUnreachable) {
			return sandbox.Result{}, err
		}
		if errors.Is(err, sandbox.ErrLost) {
			// Nothing ran: the engine may claim a new sandbox and run it there.
			return sandbox.Result{}, fmt.Errorf("%w: %v", sandbox.ErrUnreachable, err)
		}
		s.p.log.Warn("renew claim", "claim", s.claim, "err", err)
	} else {
		// From the first command on, the pod and the claim are watched: a
		// deletion seen ends what runs and refuses what comes (watch.go).
		s.ensureWatch()
	}
	if cmd.Dir == "" {
		c := *cmd
		c.Dir = "/" // pods/exec has no directory of its own to default to
		cmd = &c
	}
	if cmd.TTY != nil {
		start := time.Now()
		argv := append([]string{"/bin/sh", "-c", ttyScript, "sbx", cmd.Dir}, cmd.Env...)
		argv = append(argv, cmd.Argv...)
		err := s.stream(ctx, argv, cmd.Stdin, cmd.Stdout, nil, cmd.TTY)
		return s.result(ctx, err, start, false)
	}
	res, err := s.execHelper(ctx, cmd)
	if cmd.Sync == nil && errors.Is(err, errNoHelperBinary) {
		// No helper to upload (a dynamically linked sbx and no sbx-inpod):
		// a command without a sync can still run, one exec each.
		return s.execWrapper(ctx, cmd)
	}
	return res, err
}

// execWrapper runs cmd with one exec of wrapperScript.
func (s *Sandbox) execWrapper(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	start := time.Now()
	id, mark := randomID(), randomID()
	merge := cmd.Stdout != nil && cmd.Stdout == cmd.Stderr
	if len(cmd.Fd4) > sandbox.MaxFd4 {
		return sandbox.Result{}, fmt.Errorf("exec: fd 4 of %d bytes is over its bound of %d", len(cmd.Fd4), sandbox.MaxFd4)
	}
	argv := append([]string{"/bin/sh", "-c"}, cmdWrapperArgs(id, cmd.Dir, cmd.DirFallback, merge, mark, cmd.Stdin != nil, cmd.Fd3 != nil, cmd.Fd4, cmd.Env, cmd.Argv, cmd.Fallback)...)
	out := newFd3Splitter(orDiscard(cmd.Stdout), "\x1e"+mark+"\x1e")
	var errw io.Writer
	if !merge && cmd.Stderr != nil {
		errw = cmd.Stderr
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	killDone := make(chan struct{})
	if cmd.Timeout > 0 {
		t := time.AfterFunc(cmd.Timeout, func() {
			timedOut.Store(true)
			defer close(killDone)
			s.killTree(context.WithoutCancel(ctx), id)
			// The stream ends when the wrapper exits; if it does not
			// (connection trouble), stop waiting for it.
			time.AfterFunc(10*time.Second, cancel)
		})
		defer t.Stop()
	}
	stopRenew := s.renewWhile(sctx)
	err := s.stream(sctx, argv, cmd.Stdin, out, errw, nil)
	stopRenew()
	if timedOut.Load() {
		<-killDone
	}
	if ctx.Err() != nil && !timedOut.Load() {
		s.killTree(context.WithoutCancel(ctx), id)
		return sandbox.Result{Duration: time.Since(start)}, ctx.Err()
	}
	out.Flush()
	if cmd.Fd3 != nil {
		cmd.Fd3.Write(out.Trailer())
	}
	if timedOut.Load() {
		return sandbox.Result{ExitCode: sandbox.TimeoutExitCode, TimedOut: true, Signal: "SIGKILL", Duration: time.Since(start)}, nil
	}
	if !out.Found() && exitCode(err) != 125 {
		// The stream ended before the wrapper finished (a pod killed under
		// it can even end it cleanly): the outcome is unknown, and the
		// command may still run; make sure it does not.
		if err == nil {
			err = errors.New("the exec stream ended before the command finished")
		}
		if lost := s.lost(ctx, err, !refusedBeforeStart(err)); lost != nil {
			return sandbox.Result{Duration: time.Since(start)}, lost
		}
		s.killTree(context.WithoutCancel(ctx), id)
		return sandbox.Result{Duration: time.Since(start)}, fmt.Errorf("exec in pod %s: %w (the command was killed)", s.pod, err)
	}
	if why := s.goneReason(); why != "" {
		// The claim or pod went while the command ran: its result is not
		// one the sandbox can stand behind.
		if err == nil {
			err = errors.New("the sandbox went away")
		}
		return sandbox.Result{Duration: time.Since(start)}, lostError(why, err, true)
	}
	res, err := s.result(ctx, err, start, out.Found())
	res.FellBack = out.FellBack()
	return res, err
}

// wrapperArgs are the arguments of sh -c that run argv with wrapperScript,
// with fd 3 and without fd 4 or a fallback.
func wrapperArgs(id, dir string, merge bool, mark string, stdin bool, env, argv []string) []string {
	return cmdWrapperArgs(id, dir, "", merge, mark, stdin, true, nil, env, argv, nil)
}

// cmdWrapperArgs are the arguments of sh -c that run argv (or fallback)
// with wrapperScript.
func cmdWrapperArgs(id, dir, dirFallback string, merge bool, mark string, stdin, fd3 bool, fd4 []byte, env, argv, fallback []string) []string {
	args := []string{wrapperScript, "sbx", id, dir, boolArg(merge), mark, boolArg(stdin), lookupPath(env), strconv.Itoa(len(env)),
		strconv.Itoa(len(argv)), boolArg(fd3), octalFormat(fd4), dirFallback}
	args = append(args, env...)
	args = append(args, argv...)
	return append(args, fallback...)
}

// octalFormat is a printf format that prints b exactly: every byte as an
// octal escape (argv cannot carry a NUL; nothing in it is a conversion).
func octalFormat(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	return s.String()
}

// lookupPath is where the wrapper looks a program up: the last PATH of env,
// as the command gets it, else sandbox.DefaultPath (internal/runner.LookPath
// has the same rule).
func lookupPath(env []string) string {
	path := sandbox.DefaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			path = v
		}
	}
	return path
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// exitCode returns the exit code an exec error carries, or -1.
func exitCode(err error) int {
	var ee interface{ ExitStatus() int }
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	return -1
}

func (s *Sandbox) result(ctx context.Context, err error, start time.Time, finished bool) (sandbox.Result, error) {
	res := sandbox.Result{Duration: time.Since(start)}
	if err == nil {
		return res, nil
	}
	if code := exitCode(err); code >= 0 {
		res.ExitCode = code
		if code > 128 && code < 128+65 {
			res.Signal = sandbox.SignalName(code - 128)
		}
		return res, nil
	}
	if lost := s.lost(ctx, err, !refusedBeforeStart(err)); lost != nil {
		return res, lost
	}
	return res, apiError(err, s.server(), "create", "pods/exec", s.ns)
}

// refusedBeforeStart reports whether an exec error came from the API server
// refusing the request (the command never started) rather than from a
// stream that broke while it ran.
func refusedBeforeStart(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) || strings.Contains(err.Error(), "unable to upgrade")
}

// renewWhile renews the claim in the background while a long command runs.
func (s *Sandbox) renewWhile(ctx context.Context) (stop func()) {
	every := s.ttl / 4
	if every < renewMinInterval {
		every = renewMinInterval
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.Renew(ctx); err != nil && ctx.Err() == nil {
					s.p.log.Warn("renew claim", "claim", s.claim, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// killTree kills the process tree of the command with this id inside the
// pod. This is the single place that knows how; the in-sandbox sync helper
// replaces it when it exists.
func (s *Sandbox) killTree(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := s.stream(ctx, []string{"/bin/sh", "-c", killScript, "sbx", id}, nil, &out, &out, nil)
	if err != nil {
		s.p.log.Warn("kill command tree", "pod", s.pod, "id", id, "err", err, "output", out.String())
	}
}

// stream runs argv in the pod over pods/exec.
func (s *Sandbox) stream(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer, tty *sandbox.TTY) error {
	opts := &corev1.PodExecOptions{
		Container: s.container, Command: argv,
		Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil && tty == nil, TTY: tty != nil,
	}
	a, err := s.api(ctx)
	if err != nil {
		return err
	}
	req := a.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.ns).Name(s.pod).
		SubResource("exec").VersionedParams(opts, scheme.ParameterCodec)
	so := remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Tty: tty != nil}
	if opts.Stderr {
		so.Stderr = stderr
	}
	if tty != nil {
		so.TerminalSizeQueue = newSizeQueue(ctx, tty)
	}
	return a.streamExec(ctx, req.URL(), so)
}

// streamExec speaks WebSocket (the v5 streaming protocol) and falls back to
// SPDY when the server refuses the WebSocket upgrade, as client-go's
// FallbackExecutor does, but builds the SPDY executor only when needed and
// remembers that WebSocket failed, so later commands go straight to SPDY.
func (a *api) streamExec(ctx context.Context, u *url.URL, so remotecommand.StreamOptions) error {
	if a.rest == nil {
		return errors.New("exec: no REST config (NewForClients needs one for Exec)")
	}
	if !a.spdyOnly.Load() {
		ws, err := remotecommand.NewWebSocketExecutor(a.rest, "GET", u.String())
		if err != nil {
			return err
		}
		err = ws.StreamWithContext(ctx, so)
		// A Role that grants pods/exec create but not get refuses the
		// WebSocket GET; SPDY's POST needs only create.
		if err == nil || !(httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) || apierrors.IsForbidden(err)) {
			return err
		}
		a.spdyOnly.Store(true)
	}
	spdy, err := remotecommand.NewSPDYExecutor(a.rest, "POST", u)
	if err != nil {
		return err
	}
	return spdy.StreamWithContext(ctx, so)
}

// sizeQueue feeds a terminal's sizes to remotecommand: the first size, then
// each resize, until ctx ends.
type sizeQueue struct {
	ctx   context.Context
	first *remotecommand.TerminalSize
	ch    <-chan sandbox.WindowSize
}

func newSizeQueue(ctx context.Context, t *sandbox.TTY) *sizeQueue {
	q := &sizeQueue{ctx: ctx, ch: t.Resize}
	if t.Size.Cols > 0 && t.Size.Rows > 0 {
		q.first = &remotecommand.TerminalSize{Width: t.Size.Cols, Height: t.Size.Rows}
	}
	return q
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if f := q.first; f != nil {
		q.first = nil
		return f
	}
	if q.ch == nil {
		<-q.ctx.Done()
		return nil
	}
	select {
	case <-q.ctx.Done():
		return nil
	case ws, ok := <-q.ch:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: ws.Cols, Height: ws.Rows}
	}
}

// fd3Splitter passes a stream through to w until a marker, and keeps what
// follows the marker apart: its first byte (the status: '1' when the
// command fell back to cmd.DirFallback) and the rest (the trailer). It
// holds back only as many bytes as could be the start of the marker, and
// keeps at most sandbox.MaxFd3+1 bytes of the trailer (the wrapper sends no
// more, but the pod chooses what the stream carries): past them it
// discards.
type fd3Splitter struct {
	w       io.Writer
	mark    []byte
	held    []byte
	found   bool
	status  []byte // the byte after the marker, once it came
	trailer bytes.Buffer
}

func newFd3Splitter(w io.Writer, mark string) *fd3Splitter {
	return &fd3Splitter{w: w, mark: []byte(mark)}
}

// keep takes the status byte from p, then adds p to the trailer, up to its
// bound.
func (f *fd3Splitter) keep(p []byte) {
	if f.status == nil && len(p) > 0 {
		f.status, p = p[:1:1], p[1:]
	}
	if room := sandbox.MaxFd3 + 1 - f.trailer.Len(); room > 0 {
		f.trailer.Write(p[:min(room, len(p))])
	}
}

func (f *fd3Splitter) Write(p []byte) (int, error) {
	if f.found {
		f.keep(p)
		return len(p), nil
	}
	data := append(f.held, p...)
	if i := bytes.Index(data, f.mark); i >= 0 {
		f.found = true
		f.held = nil
		f.keep(data[i+len(f.mark):])
		if _, err := f.w.Write(data[:i]); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	keep := 0
	for k := min(len(f.mark)-1, len(data)); k > 0; k-- {
		if bytes.HasSuffix(data, f.mark[:k]) {
			keep = k
			break
		}
	}
	out := data[:len(data)-keep]
	f.held = append([]byte(nil), data[len(data)-keep:]...)
	if len(out) > 0 {
		if _, err := f.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes out held bytes when the marker never came.
func (f *fd3Splitter) Flush() {
	if !f.found && len(f.held) > 0 {
		f.w.Write(f.held)
		f.held = nil
	}
}

// Found reports whether the marker was seen, i.e. the wrapper finished.
func (f *fd3Splitter) Found() bool { return f.found }

// Trailer returns what followed the marker and its status byte.
func (f *fd3Splitter) Trailer() []byte { return f.trailer.Bytes() }

// FellBack reports whether the status byte said that the command started in
// cmd.DirFallback.
func (f *fd3Splitter) FellBack() bool { return string(f.status) == "1" }
