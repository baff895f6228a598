package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/session"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Limits of the file tools.
const (
	DefaultReadLimit = 2000
	MaxLineChars     = 2000
	// MaxImageBytes bounds an image returned by read.
	MaxImageBytes = 10 << 20
	// MaxEditBytes bounds a file that edit reads whole.
	MaxEditBytes = 32 << 20
	// MaxContentBytes bounds what write and edit take.
	MaxContentBytes = 16 << 20
)

// Exit codes of the file scripts: each failure has its own, so the message
// can say exactly what is wrong.
const (
	exitIsDir      = 10
	exitMissing    = 11
	exitNotRegular = 12
	exitDangling   = 13
	exitUnreadable = 14
	exitMkdir      = 15
	exitWrite      = 16
	exitNotRead    = 17
	exitChanged    = 18
)

// Texts of the read-before-write guard, Claude Code's own.
const (
	ErrTextNotRead = "File has not been read yet. Read it first before writing to it."
	ErrTextChanged = "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."
)

// The file scripts take the path as "$1": agent strings are never shell text.
const (
	checkScript = `p=$1
[ -d "$p" ] && exit 10
if [ ! -e "$p" ]; then [ -L "$p" ] && exit 13; exit 11; fi
[ -f "$p" ] || exit 12
[ -r "$p" ] || exit 14
`
	readScript = checkScript + `exec cat -- "$p"`
	// writeScript overwrites an existing file only when its SHA-256 is $2,
	// the hash of what the session last read of it ("-": never read, so
	// refused; "any": no guard), checked in the same shell that writes.
	writeScript = `p=$1
[ -d "$p" ] && exit 10
d=$(dirname -- "$p")
mkdir -p -- "$d" >&2 || exit 15
if [ -e "$p" ]; then
	[ "$2" = - ] && exit 17
	if [ "$2" != any ]; then
		h=$(sha256sum < "$p") || exit 14
		[ "${h%% *}" = "$2" ] || exit 18
	fi
	echo updated
else
	echo created
fi
cat > "$p" || exit 16
`
)

// fileError turns a file script's exit code into a message.
func fileError(path string, code int, stderr string) error {
	switch code {
	case exitIsDir:
		return fmt.Errorf("%s is a directory, not a file: use bash (ls) to list it", path)
	case exitMissing:
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return fmt.Errorf("File does not exist: %s", path)
	case exitNotRegular:
		return fmt.Errorf("%s is not a regular file (a device, socket or pipe)", path)
	case exitDangling:
		return fmt.Errorf("%s is a symbolic link to a file that does not exist", path)
	case exitUnreadable:
		return fmt.Errorf("%s is not readable (permission denied)", path)
	case exitMkdir:
		return fmt.Errorf("cannot create the parent directory of %s: %s", path, strings.TrimSpace(stderr))
	case exitWrite:
		return fmt.Errorf("cannot write %s: %s", path, shellReason(stderr))
	case exitNotRead:
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return errors.New(ErrTextNotRead)
	case exitChanged:
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return errors.New(ErrTextChanged)
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = fmt.Sprintf("exit code %d", code)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// shellReason is the system's reason in a shell's message about a
// redirection that failed ("sh: 6: cannot create /x: Permission denied",
// "sh: line 5: can't create /x: ...", "bash: line 6: /x: ..."): the text
// after the last ": ", which no errno string contains. The rest names the
// file script's own shell and lines, which mean nothing to the agent.
func shellReason(stderr string) string {
	msg := strings.TrimSpace(stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	if msg == "" {
		return "the write failed"
	}
	return msg
}

// fileState is what the tools know of one session's files: which
// sandbox-only paths they have already said are sandbox-only, and the
// SHA-256 of each file as the session last read or wrote it (the
// read-before-write guard). It belongs to one session.Session: a new one
// (after a release) starts afresh.
type fileState struct {
	mu     sync.Mutex
	sess   *session.Session
	warned map[string]bool
	read   map[string]string
}

// state returns the call's session's file state, reset when the session
// is a new one. Called with st.mu held.
func (c *call) state() *fileState {
	st := &c.e.files
	if st.sess != c.sess {
		st.sess, st.warned, st.read = c.sess, map[string]bool{}, map[string]string{}
	}
	return st
}

// readHash is the hash of path as the session last read or wrote it, or
// "-" when it has not.
func (c *call) readHash(path string) string {
	st := &c.e.files
	st.mu.Lock()
	defer st.mu.Unlock()
	if h, ok := c.state().read[path]; ok {
		return h
	}
	return "-"
}

// sawFile records path's content as the session knows it now.
func (c *call) sawFile(path string, sum []byte) {
	st := &c.e.files
	st.mu.Lock()
	defer st.mu.Unlock()
	c.state().read[path] = hex.EncodeToString(sum)
}

func sha(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// inCodeDirs reports whether path is in one of the code dirs, whose
// changes the sync brings back to the host.
func (c *call) inCodeDirs(path string) bool {
	for _, d := range c.e.p.cfg.Params.CodeDirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// sandboxOnly says, the first time in the session for each path, that what
// is written at path (a file, or a working directory's contents) stays in
// the sandbox: the sync brings back only the code dirs.
func (c *call) sandboxOnly(path, what, subject string) string {
	if path == "" || c.inCodeDirs(path) {
		return ""
	}
	st := &c.e.files
	st.mu.Lock()
	defer st.mu.Unlock()
	c.state()
	if st.warned[path] {
		return ""
	}
	st.warned[path] = true
	dirs := strings.Join(c.e.p.cfg.Params.CodeDirs, ", ")
	if dirs == "" {
		dirs = "none"
	}
	return fmt.Sprintf("\nNote: %s %s is outside the code directories (%s): %s stays in the sandbox; not synced to the host, and is gone when the session is released.", what, path, dirs, subject)
}

// checkPath accepts absolute paths only, as the tools' contract says.
func checkPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("file_path is empty: give the absolute path of the file")
	case strings.ContainsRune(p, 0):
		return "", errors.New("file_path contains a NUL byte")
	case !filepath.IsAbs(p):
		return "", fmt.Errorf("file_path must be an absolute path, not a relative path: %q", p)
	}
	return filepath.Clean(p), nil
}

// ReadInput is the read tool's arguments.
type ReadInput struct {
	FilePath string `json:"file_path" jsonschema:"The absolute path to the file to read"`
	Offset   int    `json:"offset,omitempty" jsonschema:"The line number to start reading from (1-based). Only give it for files too large to read at once"`
	Limit    int    `json:"limit,omitempty" jsonschema:"The number of lines to read (default 2000). Only give it for files too large to read at once"`
}

// ReadTool reads a file in the sandbox, cat -n style, or as an image.
func ReadTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name: "read",
		Description: `Reads a file in this session's sandbox. The code directories have the same absolute paths as on the host.

- file_path must be absolute.
- Reads up to 2000 lines from the start by default; offset (1-based line number) and limit read part of a long file.
- Output is in cat -n format: each line's number right-aligned, a tab, then the line. Lines longer than 2000 characters are cut.
- PNG, JPEG, GIF and WebP files are returned as images.
- A directory is an error: use bash (ls) to list directories.`,
		Annotations: &mcp.ToolAnnotations{Title: "Read a file in the sandbox", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, p.read)
}

func (p *Sessions) read(ctx context.Context, req *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, any, error) {
	path, err := checkPath(in.FilePath)
	if err != nil {
		return nil, nil, err
	}
	if in.Offset < 0 || in.Limit < 0 {
		return nil, nil, fmt.Errorf("offset and limit must not be negative (offset %d, limit %d)", in.Offset, in.Limit)
	}
	from := max(in.Offset, 1)
	limit := in.Limit
	if limit == 0 {
		limit = DefaultReadLimit
	}
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	lc := &lines{from: from, to: from + limit - 1}
	var stderr bytes.Buffer
	sum := sha256.New()
	res, err := c.sess.Exec(ctx, session.Run{Argv: []string{"/bin/sh", "-c", readScript, "sbx", path}, Dir: "/", Stdout: io.MultiWriter(lc, sum), Stderr: &stderr})
	if err != nil {
		return nil, nil, c.failed(err)
	}
	if res.ExitCode != 0 {
		return nil, nil, fileError(path, res.ExitCode, stderr.String())
	}
	c.sawFile(path, sum.Sum(nil))
	notes := notesText(c.notes)
	if mime := imageType(lc.sniff); mime != "" {
		if lc.total > MaxImageBytes {
			return nil, nil, fmt.Errorf("%s is a %s image of %d bytes, over the %d bytes read returns", path, mime, lc.total, MaxImageBytes)
		}
		content := []mcp.Content{&mcp.ImageContent{Data: lc.raw, MIMEType: mime}}
		if notes != "" {
			content = append(content, &mcp.TextContent{Text: strings.TrimPrefix(notes, "\n")})
		}
		return &mcp.CallToolResult{Content: content}, nil, nil
	}
	if bytes.IndexByte(lc.sniff, 0) >= 0 {
		return nil, nil, fmt.Errorf("%s is a binary file (%d bytes) and is not shown as text: use bash (file, xxd, strings) to inspect it", path, lc.total)
	}
	return textResult(lc.render(path) + notes), nil, nil
}

// lines collects lines from..to (1-based, inclusive) of a stream, each cut
// to MaxLineChars, and counts them all; memory stays bounded whatever the
// file's size. It also keeps the first bytes to tell images and binaries,
// and the whole stream while it may still be an image.
type lines struct {
	from, to int

	n     int // lines completed
	cur   []byte
	kept  []string
	longs int // kept lines that were cut
	total int64
	last  byte
	sniff []byte // the first 8000 bytes
	raw   []byte // everything, while it may be an image
	noRaw bool
	quiet bool // no note about lines not shown
}

const sniffLen = 8000

func (l *lines) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	if len(l.sniff) < sniffLen {
		l.sniff = append(l.sniff, p[:min(len(p), sniffLen-len(l.sniff))]...)
	}
	if !l.noRaw {
		if len(l.sniff) >= 16 && imageType(l.sniff) == "" || l.total+int64(n) > MaxImageBytes {
			l.noRaw, l.raw = true, nil
		} else {
			l.raw = append(l.raw, p...)
		}
	}
	l.total += int64(n)
	l.last = p[n-1]
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if ln := l.n + 1; ln >= l.from && ln <= l.to {
			if room := MaxLineChars*utf8.UTFMax + 1 - len(l.cur); room > 0 {
				l.cur = append(l.cur, chunk[:min(room, len(chunk))]...)
			}
		}
		if i < 0 {
			break
		}
		l.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lines) endLine() {
	l.n++
	if l.n >= l.from && l.n <= l.to {
		s := strings.ToValidUTF8(strings.TrimSuffix(string(l.cur), "\r"), "\uFFFD")
		if utf8.RuneCountInString(s) > MaxLineChars {
			s = firstChars(s, MaxLineChars) + "... [line truncated]"
			l.longs++
		}
		l.kept = append(l.kept, s)
	}
	l.cur = l.cur[:0]
}

// render finishes the stream and formats the kept lines as cat -n does.
func (l *lines) render(path string) string {
	if l.total > 0 && l.last != '\n' {
		l.endLine()
	}
	if l.total == 0 {
		return fmt.Sprintf("(%s exists but is empty)", path)
	}
	if l.from > l.n {
		return fmt.Sprintf("(%s has %d lines; offset %d is past its end)", path, l.n, l.from)
	}
	var b strings.Builder
	for i, s := range l.kept {
		fmt.Fprintf(&b, "%6d\t%s\n", l.from+i, s)
	}
	if shown := l.from + len(l.kept) - 1; shown < l.n && !l.quiet {
		fmt.Fprintf(&b, "(showing lines %d-%d of %d; use offset and limit to read more)\n", l.from, shown, l.n)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// imageType tells the image formats read returns as images, by magic bytes.
func imageType(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && bytes.HasPrefix(b, []byte("RIFF")) && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// WriteInput is the write tool's arguments.
type WriteInput struct {
	FilePath string `json:"file_path" jsonschema:"The absolute path to the file to write (must be absolute, not relative)"`
	Content  string `json:"content" jsonschema:"The content to write to the file"`
}

// WriteTool writes a file in the sandbox.
func WriteTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name: "write",
		Description: `Writes a file in this session's sandbox, creating its parent directories, overwriting it if it exists (an existing file keeps its mode). Inside the code directories the file reaches the host before the call returns.

- file_path must be absolute. The code directories have the same absolute paths as on the host.
- An existing file must have been read (with read) in this session first, and not changed since (on the host or by a command): else the write is refused and read must be called again.
- Prefer edit for changing part of an existing file.`,
		Annotations: &mcp.ToolAnnotations{Title: "Write a file in the sandbox", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, p.write)
}

func (p *Sessions) write(ctx context.Context, req *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, any, error) {
	path, err := checkPath(in.FilePath)
	if err != nil {
		return nil, nil, err
	}
	if len(in.Content) > MaxContentBytes {
		return nil, nil, fmt.Errorf("content is %d bytes, over the limit of %d: write large files in parts with bash", len(in.Content), MaxContentBytes)
	}
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	created, rep, err := writeFile(ctx, c, path, in.Content, c.readHash(path))
	if err != nil {
		return nil, nil, err
	}
	msg := fmt.Sprintf("The file %s has been updated successfully.", path)
	if created {
		msg = fmt.Sprintf("File created successfully at: %s", path)
	}
	return textResult(msg + c.sandboxOnly(path, "the file", "it") + syncText(rep) + notesText(c.notes)), nil, nil
}

// writeFile writes content to path in the sandbox and reports whether it
// created the file and what of it did not reach the host. An existing file
// is overwritten only when its SHA-256 is guard ("-": refused; "any": not
// checked). The session then knows the file as content.
func writeFile(ctx context.Context, c *call, path, content, guard string) (created bool, rep sbxsync.Report, err error) {
	var stdout, stderr bytes.Buffer
	res, err := c.sess.Exec(ctx, session.Run{
		Argv: []string{"/bin/sh", "-c", writeScript, "sbx", path, guard}, Dir: "/",
		Stdin: strings.NewReader(content), Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		return false, res.Sync, c.failed(err)
	}
	if res.ExitCode != 0 {
		return false, res.Sync, fileError(path, res.ExitCode, stderr.String())
	}
	c.sawFile(path, sha(content))
	return strings.TrimSpace(stdout.String()) == "created", res.Sync, nil
}

// EditInput is the edit tool's arguments.
type EditInput struct {
	FilePath   string `json:"file_path" jsonschema:"The absolute path to the file to modify"`
	OldString  string `json:"old_string" jsonschema:"The text to replace"`
	NewString  string `json:"new_string" jsonschema:"The text to replace it with (must be different from old_string)"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"Replace all occurrences of old_string (default false)"`
}

// EditTool replaces an exact string in a file in the sandbox.
func EditTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name: "edit",
		Description: `Performs an exact string replacement in a file in this session's sandbox. Inside the code directories the change reaches the host before the call returns.

- file_path must be absolute.
- The file must have been read (with read) in this session first, and not changed since (on the host or by a command): else the edit is refused and read must be called again.
- The edit fails if old_string is not found, or if it occurs more than once and replace_all is false: give more surrounding context to make it unique, or set replace_all to replace every occurrence.
- old_string and new_string must differ. Files with CRLF line endings keep them.
- An empty old_string creates a file that does not exist yet.
- On any error the file is left unchanged.`,
		Annotations: &mcp.ToolAnnotations{Title: "Edit a file in the sandbox", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, p.edit)
}

// Error texts of edit that agents know from their built-in tools.
const (
	ErrTextNotFound = "String to replace not found in file."
	ErrTextSame     = "No changes to make: old_string and new_string are exactly the same."
)

// ErrTextMultiple is the message for an ambiguous old_string.
func ErrTextMultiple(n int) string {
	return fmt.Sprintf("Found %d matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.", n)
}

// Replace applies an edit to content: the rules of the edit tool, without
// I/O. It returns the new content, the number of replacements, and the byte
// offset of the first one.
func Replace(content, old, new string, all bool) (string, int, int, error) {
	if old == new {
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return "", 0, 0, errors.New(ErrTextSame)
	}
	if old == "" {
		return "", 0, 0, errors.New("old_string is empty: to replace a whole file use write; to create a file, edit one that does not exist")
	}
	// Agents send "\n"; a CRLF file keeps its line endings.
	if strings.Contains(content, "\r\n") && !strings.Contains(old, "\r\n") && strings.Contains(old, "\n") {
		crOld := strings.ReplaceAll(old, "\n", "\r\n")
		if strings.Contains(content, crOld) {
			old = crOld
			new = strings.ReplaceAll(strings.ReplaceAll(new, "\r\n", "\n"), "\n", "\r\n")
		}
	}
	n := strings.Count(content, old)
	switch {
	case n == 0:
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return "", 0, 0, errors.New(ErrTextNotFound)
	case n > 1 && !all:
		return "", 0, 0, errors.New(ErrTextMultiple(n))
	}
	at := strings.Index(content, old)
	if all {
		return strings.ReplaceAll(content, old, new), n, at, nil
	}
	return content[:at] + new + content[at+len(old):], 1, at, nil
}

func (p *Sessions) edit(ctx context.Context, req *mcp.CallToolRequest, in EditInput) (*mcp.CallToolResult, any, error) {
	path, err := checkPath(in.FilePath)
	if err != nil {
		return nil, nil, err
	}
	if len(in.OldString) > MaxContentBytes || len(in.NewString) > MaxContentBytes {
		return nil, nil, fmt.Errorf("old_string or new_string is over the limit of %d bytes", MaxContentBytes)
	}
	if in.OldString == in.NewString {
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return nil, nil, errors.New(ErrTextSame)
	}
	c, err := p.acquire(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	defer c.done()
	var stdout, stderr bytes.Buffer
	lim := &limited{w: &stdout, n: MaxEditBytes}
	res, err := c.sess.Exec(ctx, session.Run{Argv: []string{"/bin/sh", "-c", readScript, "sbx", path}, Dir: "/", Stdout: lim, Stderr: &stderr})
	if err != nil {
		return nil, nil, c.failed(err)
	}
	var content, updated string
	var count, at int
	guard := c.readHash(path)
	exists := res.ExitCode == 0
	switch {
	case exists && guard == "-":
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return nil, nil, errors.New(ErrTextNotRead)
	case exists && !lim.over && guard != hex.EncodeToString(sha(stdout.String())):
		//lint:ignore ST1005 the exact text of Claude Code's own file tools, which agents already know and act on
		return nil, nil, errors.New(ErrTextChanged)
	case res.ExitCode == exitMissing && in.OldString == "":
		updated, count = in.NewString, 1
	case res.ExitCode != 0:
		return nil, nil, fileError(path, res.ExitCode, stderr.String())
	case lim.over:
		return nil, nil, fmt.Errorf("%s is over %d bytes, too large for edit: use bash (sed, patch) for it", path, MaxEditBytes)
	case in.OldString == "" && stdout.Len() > 0:
		return nil, nil, fmt.Errorf("cannot create %s: the file already exists; give old_string to edit it, or use write to replace it", path)
	case in.OldString == "":
		updated, count = in.NewString, 1
	default:
		content = stdout.String()
		updated, count, at, err = Replace(content, in.OldString, in.NewString, in.ReplaceAll)
		if err != nil {
			return nil, nil, err
		}
	}
	if !exists {
		guard = "-" // a file made meanwhile is not overwritten
	}
	created, rep, err := writeFile(ctx, c, path, updated, guard)
	if err != nil {
		return nil, nil, err
	}
	var msg string
	switch {
	case created:
		msg = fmt.Sprintf("File created successfully at: %s", path)
	case count > 1:
		msg = fmt.Sprintf("The file %s has been updated. All %d occurrences were replaced.", path, count)
	default:
		msg = fmt.Sprintf("The file %s has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n%s", path, snippet(updated, at, in.NewString))
	}
	return textResult(msg + c.sandboxOnly(path, "the file", "it") + syncText(rep) + notesText(c.notes)), nil, nil
}

// snippet shows the lines around an edit, numbered as read shows them.
func snippet(content string, at int, inserted string) string {
	const context = 4
	first := strings.Count(content[:at], "\n") + 1
	last := first + strings.Count(inserted, "\n")
	l := &lines{from: max(first-context, 1), to: last + context, quiet: true}
	l.Write([]byte(content))
	return l.render("")
}

// limited passes on at most n bytes and notes whether there were more.
type limited struct {
	w    *bytes.Buffer
	n    int
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room < len(p) {
		l.over = true
		l.w.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.w.Write(p)
}
