package tools

import (
	"fmt"
	"strings"
)

// The apply_patch grammar is Codex's own (codex-rs/apply-patch), so that the
// instructions Codex's models are trained on fit:
//
//	*** Begin Patch
//	*** Add File: PATH        then the file's lines, each starting with +
//	*** Delete File: PATH
//	*** Update File: PATH
//	*** Move to: NEWPATH      optional, right after Update File
//	@@ [CONTEXT]              a chunk: CONTEXT is a line found before it
//	 context / -old / +new    the chunk's lines (an empty line is context)
//	*** End of File           optional, after a chunk: it ends the file
//	*** End Patch
//
// The first chunk of an update may omit its @@ line. As Codex does, a patch
// wrapped in a shell heredoc (<<'EOF' ... EOF) is accepted.

// Patch grammar markers.
const (
	patchBegin  = "*** Begin Patch"
	patchEnd    = "*** End Patch"
	patchAdd    = "*** Add File: "
	patchDelete = "*** Delete File: "
	patchUpdate = "*** Update File: "
	patchMove   = "*** Move to: "
	patchEOF    = "*** End of File"
)

// PatchKind is what a file operation of a patch does.
type PatchKind int

// The file operations of a patch.
const (
	PatchAddFile PatchKind = iota
	PatchDeleteFile
	PatchUpdateFile
)

// PatchOp is one file operation of a patch.
type PatchOp struct {
	Kind PatchKind
	Path string
	// MoveTo is the new path of an updated file ("" to stay).
	MoveTo string
	// Content is an added file's content.
	Content string
	// Chunks are an update's changes, in file order.
	Chunks []PatchChunk
	// Line is the patch line (1-based) where the operation starts.
	Line int
}

// PatchChunk is one change of an update: the lines Old (context and
// removed lines) become New (context and added lines).
type PatchChunk struct {
	// Context is the @@ line's text: a line found before the change.
	Context string
	Old     []string
	New     []string
	// EndOfFile anchors the chunk at the end of the file.
	EndOfFile bool
	Line      int
}

// ParsePatch parses a patch in Codex's apply_patch grammar. It does no I/O.
func ParsePatch(text string) ([]PatchOp, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	first := 0
	// A heredoc around the patch, as a model writes it for a shell.
	if len(lines) >= 4 && isHeredocStart(lines[0]) && strings.TrimSpace(lines[len(lines)-1]) == heredocWord(lines[0]) {
		lines, first = lines[1:len(lines)-1], 1
	}
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != patchBegin {
		return nil, fmt.Errorf("invalid patch: the first line of the patch must be '%s'", patchBegin)
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != patchEnd {
		return nil, fmt.Errorf("invalid patch: the last line of the patch must be '%s'", patchEnd)
	}
	body := lines[1 : len(lines)-1]
	var ops []PatchOp
	for i := 0; i < len(body); {
		n := i + 2 + first // 1-based line number in the text
		line := body[i]
		switch {
		case strings.HasPrefix(line, patchAdd):
			op := PatchOp{Kind: PatchAddFile, Path: strings.TrimSpace(line[len(patchAdd):]), Line: n}
			i++
			var content strings.Builder
			for i < len(body) && strings.HasPrefix(body[i], "+") {
				content.WriteString(body[i][1:])
				content.WriteByte('\n')
				i++
			}
			op.Content = content.String()
			ops = append(ops, op)
		case strings.HasPrefix(line, patchDelete):
			ops = append(ops, PatchOp{Kind: PatchDeleteFile, Path: strings.TrimSpace(line[len(patchDelete):]), Line: n})
			i++
		case strings.HasPrefix(line, patchUpdate):
			op := PatchOp{Kind: PatchUpdateFile, Path: strings.TrimSpace(line[len(patchUpdate):]), Line: n}
			i++
			if i < len(body) && strings.HasPrefix(body[i], patchMove) {
				op.MoveTo = strings.TrimSpace(body[i][len(patchMove):])
				i++
			}
			for i < len(body) && !strings.HasPrefix(body[i], "*** ") {
				if strings.TrimSpace(body[i]) == "" && (i+1 == len(body) || strings.HasPrefix(body[i+1], "*** ")) {
					i++ // a blank line between operations
					continue
				}
				ch, next, err := parseChunk(body, i, len(op.Chunks) == 0, first)
				if err != nil {
					return nil, err
				}
				op.Chunks = append(op.Chunks, ch)
				i = next
			}
			if len(op.Chunks) == 0 && op.MoveTo == "" {
				return nil, fmt.Errorf("invalid patch: line %d: update file hunk for path '%s' is empty", n, op.Path)
			}
			ops = append(ops, op)
		case strings.TrimSpace(line) == "":
			i++
		default:
			return nil, fmt.Errorf("invalid patch: line %d: '%s' is not a valid hunk header. Valid hunk headers: '%s{path}', '%s{path}', '%s{path}'", n, line, patchAdd, patchDelete, patchUpdate)
		}
	}
	for _, op := range ops {
		if op.Path == "" {
			return nil, fmt.Errorf("invalid patch: line %d: the operation names no file", op.Line)
		}
	}
	return ops, nil
}

// parseChunk parses a chunk starting at body[i]: its @@ line (optional for
// an update's first chunk) and its lines, up to the next @@ or ***.
func parseChunk(body []string, i int, firstChunk bool, first int) (PatchChunk, int, error) {
	ch := PatchChunk{Line: i + 2 + first}
	switch line := body[i]; {
	case line == "@@":
		i++
	case strings.HasPrefix(line, "@@ "):
		ch.Context = line[3:]
		i++
	case !firstChunk:
		return ch, i, fmt.Errorf("invalid patch: line %d: expected a chunk starting with '@@', got '%s'", ch.Line, line)
	}
	n := 0
	for ; i < len(body); i++ {
		line := body[i]
		if line == patchEOF {
			ch.EndOfFile = true
			i++
			break
		}
		if strings.HasPrefix(line, "@@") || strings.HasPrefix(line, "*** ") {
			break
		}
		switch {
		case line == "":
			ch.Old, ch.New = append(ch.Old, ""), append(ch.New, "")
		case line[0] == ' ':
			ch.Old, ch.New = append(ch.Old, line[1:]), append(ch.New, line[1:])
		case line[0] == '-':
			ch.Old = append(ch.Old, line[1:])
		case line[0] == '+':
			ch.New = append(ch.New, line[1:])
		default:
			return ch, i, fmt.Errorf("invalid patch: line %d: '%s' is not a chunk line: chunk lines start with ' ' (context), '-' (removed) or '+' (added)", i+2+first, line)
		}
		n++
	}
	if n == 0 {
		return ch, i, fmt.Errorf("invalid patch: line %d: the chunk has no lines", ch.Line)
	}
	return ch, i, nil
}

func isHeredocStart(line string) bool {
	return heredocWord(line) != ""
}

// heredocWord is the end word of a heredoc opening line such as
// "<<'EOF'", "<<EOF" or "apply_patch <<\"EOF\"", or "".
func heredocWord(line string) string {
	i := strings.Index(line, "<<")
	if i < 0 {
		return ""
	}
	w := strings.Trim(strings.TrimSpace(strings.TrimPrefix(line[i+2:], "-")), `'"`)
	if w == "" || strings.ContainsAny(w, " \t") {
		return ""
	}
	return w
}

// ApplyChunks applies an update's chunks to a file's content, as Codex
// does: each chunk's @@ context line and then its old lines are looked for
// from where the previous chunk ended (exactly, then ignoring trailing
// space, then ignoring surrounding space); a chunk marked End of File is
// looked for at the end. Nothing is changed unless every chunk is found.
// The result ends with a newline.
func ApplyChunks(path, content string, chunks []PatchChunk) (string, error) {
	lines := strings.Split(content, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	type repl struct {
		at, n int
		new   []string
	}
	var repls []repl
	at := 0
	for k, ch := range chunks {
		if ch.Context != "" {
			i := seekLines(lines, []string{ch.Context}, at, false)
			if i < 0 {
				return "", fmt.Errorf("chunk %d (patch line %d): failed to find context '%s' in %s", k+1, ch.Line, ch.Context, path)
			}
			at = i + 1
		}
		if len(ch.Old) == 0 {
			// Pure addition: at the end of the file.
			repls = append(repls, repl{at: len(lines), new: ch.New})
			continue
		}
		old, new := ch.Old, ch.New
		i := seekLines(lines, old, at, ch.EndOfFile)
		if i < 0 && old[len(old)-1] == "" {
			// The patch's last line may stand for the file's final newline.
			old = old[:len(old)-1]
			if len(new) > 0 && new[len(new)-1] == "" {
				new = new[:len(new)-1]
			}
			if len(old) > 0 {
				i = seekLines(lines, old, at, ch.EndOfFile)
			}
		}
		if i < 0 {
			return "", fmt.Errorf("chunk %d (patch line %d): failed to find expected lines in %s:\n%s", k+1, ch.Line, path, strings.Join(ch.Old, "\n"))
		}
		repls = append(repls, repl{at: i, n: len(old), new: new})
		at = i + len(old)
	}
	// Apply from the last, so earlier indices stay valid.
	for k := len(repls) - 1; k >= 0; k-- {
		r := repls[k]
		tail := append([]string{}, lines[r.at+r.n:]...)
		lines = append(append(lines[:r.at], r.new...), tail...)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// seekLines finds pat in lines at or after start (or, for eof, at the end
// first), trying exact matches, then matches ignoring trailing white space,
// then ignoring surrounding white space.
func seekLines(lines, pat []string, start int, eof bool) int {
	if len(pat) > len(lines) {
		return -1
	}
	for _, norm := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	} {
		match := func(i int) bool {
			for j, p := range pat {
				if norm(lines[i+j]) != norm(p) {
					return false
				}
			}
			return true
		}
		if eof {
			if i := len(lines) - len(pat); i >= start && match(i) {
				return i
			}
		}
		for i := start; i+len(pat) <= len(lines); i++ {
			if match(i) {
				return i
			}
		}
	}
	return -1
}
