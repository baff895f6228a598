package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/internal/escape"
	"github.com/sbx-sh/sbx/router"
	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Limits of the bash tool.
const (
	DefaultTimeout = 120 * time.Second
	MaxTimeout     = 600 * time.Second
	// MaxCommandBytes is the kernel's limit on one argument (MAX_ARG_STRLEN):
	// the command line reaches the shell as one.
	MaxCommandBytes = 128*1024 - 1
	// JobOutputMax is how much of a background job's output is kept.
	JobOutputMax = 1 << 20
	// progressEvery is how often a long command reports that it still runs.
	progressEvery = 2 * time.Second
)

// BashInput is the bash tool's arguments.
type BashInput struct {
	Command         string `json:"command" jsonschema:"The command to run (bash). The working directory persists between calls (a cd holds for the next call); environment variables set in one call do not."`
	Timeout         int    `json:"timeout,omitempty" jsonschema:"Optional timeout in milliseconds (default 120000, max 600000). A command that runs longer is killed with everything it started."`
	Description     string `json:"description,omitempty" jsonschema:"Clear, concise description of what this command does in 5-10 words."`
	RunInBackground bool   `json:"run_in_background,omitempty" jsonschema:"Set to true to run this command in the background. The call returns an id at once; read the output with bash_output and stop it with bash_kill."`
}

// BashOutput is the bash tool's structured result.
type BashOutput struct {
	ExitCode   *int   `json:"exit_code,omitempty" jsonschema:"the command's exit code (124 after a timeout); absent for a job still running"`
	DurationMs int64  `json:"duration_ms" jsonschema:"how long the command ran, in milliseconds"`
	TimedOut   bool   `json:"timed_out" jsonschema:"the command ran past its timeout and was killed"`
	Truncated  bool   `json:"truncated" jsonschema:"the output was cut to its head and tail"`
	Cwd        string `json:"cwd,omitempty" jsonschema:"the working directory the next command starts in"`
	ID         string `json:"id,omitempty" jsonschema:"the background job's id, for bash_output and bash_kill"`
	Status     string `json:"status,omitempty" jsonschema:"for a background job: running, exited, killed or timed_out"`
}

// BashTool runs shell commands in the caller's sandbox.
func BashTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name: "bash",
		Description: `Runs a bash command in this session's sandbox and returns its output (stdout and stderr interleaved as produced) and exit code.

The sandbox is a disposable Linux environment that holds the project's code directories at the same absolute paths as on the host: what a command changes there is copied back to the host before the call returns. Everything else (installed packages, /tmp, processes) stays in the sandbox and is gone when the session is released. The network is loopback-only unless the server was started with --net.

- The working directory persists between calls (a cd holds for the next call); environment variables do not.
- timeout is in milliseconds: default 120000 (2 minutes), max 600000 (10 minutes). On timeout the command is killed with everything it started.
- Output longer than 30000 characters keeps its head and tail, with a line saying how much was cut.
- run_in_background: true returns at once with a job id; use bash_output to read its new output and status, bash_kill to stop it. Jobs end with the session.
- Prefer the read, write and edit tools for files.`,
		Annotations: &mcp.ToolAnnotations{Title: "Run a shell command in the sandbox", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, p.bash)
}

func (p *Sessions) bash(ctx context.Context, req *mcp.CallToolRequest, in BashInput) (*mcp.CallToolResult, *BashOutput, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, nil, errors.New("command is empty: pass the shell command to run")
	}
	if len(in.Command) > MaxCommandBytes {
		return nil, nil, fmt.Errorf("command is %d bytes, over the limit of %d (the kernel's limit on one argument): write long scripts to a file with the write tool and run that file", len(in.Command), MaxCommandBytes)
	}
	if strings.ContainsRune(in.Command, 0) {
		return nil, nil, errors.New("command contains a NUL byte, which no shell command can hold")
	}
	if in.Timeout < 0 {
		return nil, nil, fmt.Errorf("timeout %d is negative: give milliseconds, at most %d", in.Timeout, MaxTimeout.Milliseconds())
	}
	timeout := DefaultTimeout
	if in.Timeout > 0 {
		timeout = min(time.Duration(in.Timeout)*time.Millisecond, MaxTimeout)
	}
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	if in.RunInBackground {
		var t time.Duration
		if in.Timeout > 0 {
			t = timeout
		}
		return p.spawn(ctx, c, in, t)
	}
	stop := c.prog.ticker(progressEvery, "running")
	run := func(dir string) (*capture, session.Outcome, error) {
		out := newCapture(OutputLimit)
		res, err := c.sess.Exec(ctx, session.Run{
			Command: in.Command, Shell: "/bin/bash", Dir: dir,
			Stdout: out, Stderr: out, Timeout: timeout,
		})
		return out, res, err
	}
	// A working directory that a command removed is the engine's to handle:
	// it runs the next command in the first code dir and says so.
	out, res, err := run(c.firstDir())
	stop()
	var syncErr error
	if errors.Is(err, session.ErrSync) {
		syncErr, err = fmt.Errorf("the command ran, but: %w", err), nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("the command was cancelled and killed with everything it started: %w", ctx.Err())
		}
		return nil, nil, c.failed(err)
	}
	text, truncated := out.render(OutputLimit)
	code := res.ExitCode
	so := &BashOutput{
		ExitCode: &code, DurationMs: res.Duration.Milliseconds(), TimedOut: res.TimedOut,
		Truncated: truncated, Cwd: res.Cwd,
	}
	if so.Cwd == "" {
		so.Cwd = c.cwd()
	}
	var b strings.Builder
	text = strings.TrimRight(text, "\n")
	if text == "" {
		text = "(no output)"
	}
	b.WriteString(text)
	b.WriteString("\n")
	if res.TimedOut {
		fmt.Fprintf(&b, "Command timed out after %s and was killed with everything it started.\n", timeout)
	} else if res.Signal != "" {
		fmt.Fprintf(&b, "Killed by signal %s.\n", res.Signal)
	}
	fmt.Fprintf(&b, "Exit code: %d", code)
	if res.Route.Where == router.Host {
		fmt.Fprintf(&b, "\nRan on the host, not in the sandbox: %s", res.Route.Reason)
	}
	if res.Route.Where != router.Host {
		b.WriteString(c.sandboxOnly(so.Cwd, "the working directory", "what is written there"))
	}
	b.WriteString(syncText(res.Sync))
	b.WriteString(lossText(res.Sync, c.e.name))
	b.WriteString(notesText(append(c.notes, c.sess.Notices()...)))
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
	if syncErr != nil {
		// The command ran, but the host does not have what it did.
		result.IsError = true
		result.Content = append(result.Content, &mcp.TextContent{Text: escape.Line(syncErr.Error())})
	}
	return result, so, nil
}

// syncText says what the sync did not simply apply to the host.
func syncText(rep sbxsync.Report) string {
	var b strings.Builder
	for _, r := range rep.Refused {
		b.WriteString("\nNot brought back to the host: ")
		b.WriteString(r.Error())
	}
	for _, c := range rep.Conflicts {
		b.WriteString("\nConflict: " + session.ConflictNote(c))
	}
	for _, q := range rep.Quarantined {
		fmt.Fprintf(&b, "\nQuarantined: %s is a file host tools trust; the sandbox's change waits under %s for the user to review (sbx accept)", escape.Name(q), sbxsync.QuarantineDir)
	}
	return b.String()
}

// job is a background command.
type job struct {
	id      string
	command string
	cancel  context.CancelFunc
	out     *ring
	wake    chan struct{} // gets a value after output arrives (bash_output's block)
	done    chan struct{}
	started time.Time

	mu       sync.Mutex
	outcome  session.Outcome
	err      error
	killed   bool
	reported bool // the end was reported by bash_output
}

func (p *Sessions) spawn(ctx context.Context, c *call, in BashInput, timeout time.Duration) (*mcp.CallToolResult, *BashOutput, error) {
	jctx, cancel := context.WithCancel(context.Background())
	j := &job{command: in.Command, cancel: cancel, out: &ring{max: JobOutputMax}, wake: make(chan struct{}, 1), done: make(chan struct{}), started: time.Now()}
	out := wakeWriter{j.out, j.wake}
	sj, err := c.sess.Spawn(jctx, session.Run{
		Command: in.Command, Shell: "/bin/bash", Dir: c.firstDir(),
		Stdout: out, Stderr: out, Timeout: timeout,
	})
	if err != nil {
		cancel()
		return nil, nil, c.failed(err)
	}
	e := c.e
	e.mu.Lock()
	e.nextJob++
	j.id = "bash_" + strconv.Itoa(e.nextJob)
	if e.sess == c.sess {
		e.jobs[j.id] = j
	} else {
		cancel() // released meanwhile
	}
	e.mu.Unlock()
	go func() {
		o, err := sj.Wait()
		j.mu.Lock()
		j.outcome, j.err = o, err
		j.mu.Unlock()
		cancel()
		close(j.done)
	}()
	text := fmt.Sprintf("Command running in the background with id: %s\nRead its output with bash_output {\"id\": %q}; stop it with bash_kill.", j.id, j.id)
	text += notesText(c.notes)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}},
		&BashOutput{ID: j.id, Status: "running", Cwd: c.cwd()}, nil
}

// wakeWriter passes a job's output to its ring and wakes a bash_output
// that waits for it.
type wakeWriter struct {
	r    *ring
	wake chan struct{}
}

func (w wakeWriter) Write(p []byte) (int, error) {
	n, err := w.r.Write(p)
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
	return n, err
}

// stopJobs kills jobs and waits a little for each to end and bring back
// what it changed.
func stopJobs(jobs []*job) {
	for _, j := range jobs {
		j.mu.Lock()
		j.killed = true
		j.mu.Unlock()
		j.cancel()
	}
	deadline := time.After(10 * time.Second)
	for _, j := range jobs {
		select {
		case <-j.done:
		case <-deadline:
			return
		}
	}
}

// JobInput names a background job.
type JobInput struct {
	ID string `json:"id" jsonschema:"The id of the background job, as returned by bash with run_in_background."`
}

// Limits of bash_output's wait.
const (
	DefaultOutputWait = 30 * time.Second
	MaxOutputWait     = 600 * time.Second
)

// OutputInput is bash_output's arguments.
type OutputInput struct {
	ID      string `json:"id" jsonschema:"The id of the background job, as returned by bash with run_in_background."`
	Block   bool   `json:"block,omitempty" jsonschema:"Wait for new output or the job's end before returning (default false: return at once)."`
	Timeout int    `json:"timeout,omitempty" jsonschema:"With block: how long to wait at most, in milliseconds (default 30000, max 600000). When it passes, the call returns what there is, with the status running."`
}

// BashOutputTool reads a background job's new output and status.
func BashOutputTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name:        "bash_output",
		Description: "Returns the output a background bash job (started with run_in_background) produced since the last bash_output call for it, and its status: running, or how it ended (exit code). With block: true it first waits, up to timeout milliseconds (default 30000, max 600000), for new output or the job's end. Only the last 1 MiB of a job's output is kept.",
		Annotations: &mcp.ToolAnnotations{Title: "Read a background job's output", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, p.bashOutput)
}

func (p *Sessions) findJob(ctx context.Context, req *mcp.CallToolRequest, id string) (*call, *job, error) {
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	c.e.mu.Lock()
	j := c.e.jobs[id]
	var ids []string
	for k := range c.e.jobs {
		ids = append(ids, k)
	}
	c.e.mu.Unlock()
	if j == nil {
		c.done()
		known := "there are none in this session"
		if len(ids) > 0 {
			known = "known ids: " + strings.Join(sortStrings(ids), ", ")
		}
		return nil, nil, fmt.Errorf("no background job with id %q (%s); jobs end when the sandbox is released", id, known)
	}
	return c, j, nil
}

func (p *Sessions) bashOutput(ctx context.Context, req *mcp.CallToolRequest, in OutputInput) (*mcp.CallToolResult, *BashOutput, error) {
	if in.Timeout < 0 {
		return nil, nil, fmt.Errorf("timeout %d is negative: give milliseconds, at most %d", in.Timeout, MaxOutputWait.Milliseconds())
	}
	c, j, err := p.findJob(ctx, req, in.ID)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	var ended bool
	select {
	case <-j.done:
		ended = true
	default:
	}
	raw, dropped := j.out.next()
	if in.Block && !ended && len(raw) == 0 && dropped == 0 {
		wait := DefaultOutputWait
		if in.Timeout > 0 {
			wait = min(time.Duration(in.Timeout)*time.Millisecond, MaxOutputWait)
		}
		raw, dropped, ended, err = j.wait(ctx, wait)
		if err != nil {
			return nil, nil, err
		}
	}
	capt := newCapture(OutputLimit)
	capt.Write(raw)
	text, truncated := capt.render(OutputLimit)
	so := &BashOutput{ID: j.id, Truncated: truncated || dropped > 0, Status: "running", DurationMs: time.Since(j.started).Milliseconds()}
	var b strings.Builder
	if dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes of earlier output were dropped: only the last %d bytes of a job's output are kept]\n", dropped, JobOutputMax)
	}
	text = strings.TrimRight(text, "\n")
	if text == "" {
		text = "(no new output)"
	}
	b.WriteString(text)
	b.WriteString("\n")
	if !ended {
		b.WriteString("Status: running")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, so, nil
	}
	j.mu.Lock()
	o, jerr, killed := j.outcome, j.err, j.killed
	j.reported = true
	j.mu.Unlock()
	so.DurationMs = o.Duration.Milliseconds()
	code := o.ExitCode
	switch {
	case killed:
		so.Status = "killed"
		b.WriteString("Status: killed")
	case o.TimedOut:
		so.Status, so.TimedOut, so.ExitCode = "timed_out", true, &code
		fmt.Fprintf(&b, "Status: timed out and killed\nExit code: %d", code)
	case jerr != nil:
		so.Status = "exited"
		fmt.Fprintf(&b, "Status: failed: %v", c.failed(jerr))
	default:
		so.Status, so.ExitCode = "exited", &code
		fmt.Fprintf(&b, "Status: exited\nExit code: %d", code)
	}
	b.WriteString(syncText(o.Sync))
	b.WriteString(lossText(o.Sync, c.e.name))
	b.WriteString(notesText(c.notes))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, so, nil
}

// wait waits up to d for new output of the job or its end, and returns
// that output. A wake-up left from output already read is not new output:
// the wait goes on.
func (j *job) wait(ctx context.Context, d time.Duration) (raw []byte, dropped int64, ended bool, err error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, 0, false, fmt.Errorf("bash_output was cancelled while it waited: %w", ctx.Err())
		case <-timer.C:
			raw, dropped = j.out.next()
			return raw, dropped, false, nil
		case <-j.done:
			raw, dropped = j.out.next()
			return raw, dropped, true, nil
		case <-j.wake:
			if raw, dropped = j.out.next(); len(raw) > 0 || dropped > 0 {
				select {
				case <-j.done:
					ended = true
				default:
				}
				return raw, dropped, ended, nil
			}
		}
	}
}

// BashKillTool stops a background job.
func BashKillTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name:        "bash_kill",
		Description: "Stops a background bash job (started with run_in_background) and everything it started. What it changed in the code directories is still copied back to the host.",
		Annotations: &mcp.ToolAnnotations{Title: "Stop a background job", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, p.bashKill)
}

func (p *Sessions) bashKill(ctx context.Context, req *mcp.CallToolRequest, in JobInput) (*mcp.CallToolResult, any, error) {
	c, j, err := p.findJob(ctx, req, in.ID)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	select {
	case <-j.done:
		j.mu.Lock()
		code := j.outcome.ExitCode
		j.mu.Unlock()
		return textResult(fmt.Sprintf("Job %s had already ended (exit code %d).", j.id, code)), nil, nil
	default:
	}
	stopJobs([]*job{j})
	select {
	case <-j.done:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	j.mu.Lock()
	rep := j.outcome.Sync
	j.mu.Unlock()
	return textResult(fmt.Sprintf("Job %s was killed with everything it started.", j.id) + syncText(rep) + notesText(c.notes)), nil, nil
}
