package tools

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParsePatch(t *testing.T) {
	for _, tc := range []struct {
		name, patch string
		want        []PatchOp
		err         string
	}{
		{"add", "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** End Patch\n",
			[]PatchOp{{Kind: PatchAddFile, Path: "a.txt", Content: "one\ntwo\n", Line: 2}}, ""},
		{"add empty file", "*** Begin Patch\n*** Add File: e\n*** End Patch",
			[]PatchOp{{Kind: PatchAddFile, Path: "e", Line: 2}}, ""},
		{"delete", "*** Begin Patch\n*** Delete File: d\n*** End Patch",
			[]PatchOp{{Kind: PatchDeleteFile, Path: "d", Line: 2}}, ""},
		{"update without @@ and with a move", "*** Begin Patch\n*** Update File: u\n*** Move to: v\n a\n-b\n+c\n*** End Patch",
			[]PatchOp{{Kind: PatchUpdateFile, Path: "u", MoveTo: "v", Line: 2, Chunks: []PatchChunk{{Old: []string{"a", "b"}, New: []string{"a", "c"}, Line: 4}}}}, ""},
		{"two chunks, context, end of file", "*** Begin Patch\n*** Update File: u\n@@ func f\n-x\n+y\n@@\n z\n+w\n*** End of File\n*** End Patch",
			[]PatchOp{{Kind: PatchUpdateFile, Path: "u", Line: 2, Chunks: []PatchChunk{
				{Context: "func f", Old: []string{"x"}, New: []string{"y"}, Line: 3},
				{Old: []string{"z"}, New: []string{"z", "w"}, EndOfFile: true, Line: 6}}}}, ""},
		{"empty line is context", "*** Begin Patch\n*** Update File: u\n@@\n a\n\n-b\n*** End Patch",
			[]PatchOp{{Kind: PatchUpdateFile, Path: "u", Line: 2, Chunks: []PatchChunk{{Old: []string{"a", "", "b"}, New: []string{"a", ""}, Line: 3}}}}, ""},
		{"heredoc around it", "apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: d\n*** End Patch\nEOF\n",
			[]PatchOp{{Kind: PatchDeleteFile, Path: "d", Line: 3}}, ""},
		{"CRLF", "*** Begin Patch\r\n*** Delete File: d\r\n*** End Patch\r\n",
			[]PatchOp{{Kind: PatchDeleteFile, Path: "d", Line: 2}}, ""},
		{"no begin", "*** Delete File: d\n*** End Patch", nil, "the first line of the patch must be '*** Begin Patch'"},
		{"no end", "*** Begin Patch\n*** Delete File: d", nil, "the last line of the patch must be '*** End Patch'"},
		{"bad header", "*** Begin Patch\n*** Frobnicate: d\n*** End Patch", nil, "line 2: '*** Frobnicate: d' is not a valid hunk header"},
		{"empty update", "*** Begin Patch\n*** Update File: u\n*** End Patch", nil, "update file hunk for path 'u' is empty"},
		{"bad chunk line", "*** Begin Patch\n*** Update File: u\n@@\n a\nx\n*** End Patch", nil, "line 5: 'x' is not a chunk line"},
		{"second chunk without @@", "*** Begin Patch\n*** Update File: u\n@@\n a\n*** End of File\n b\n*** End Patch", nil, "line 6: expected a chunk starting with '@@'"},
		{"no path", "*** Begin Patch\n*** Delete File: \n*** End Patch", nil, "names no file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePatch(tc.patch)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestApplyChunks(t *testing.T) {
	chunk := func(ctx string, old, new []string, eof bool) PatchChunk {
		return PatchChunk{Context: ctx, Old: old, New: new, EndOfFile: eof, Line: 1}
	}
	for _, tc := range []struct {
		name, content string
		chunks        []PatchChunk
		want, err     string
	}{
		{"replace", "a\nb\nc\n", []PatchChunk{chunk("", []string{"b"}, []string{"B"}, false)}, "a\nB\nc\n", ""},
		{"context places the change", "f\nx\ng\nx\n", []PatchChunk{chunk("g", []string{"x"}, []string{"y"}, false)}, "f\nx\ng\ny\n", ""},
		{"chunks in order", "x\nx\n", []PatchChunk{chunk("", []string{"x"}, []string{"1"}, false), chunk("", []string{"x"}, []string{"2"}, false)}, "1\n2\n", ""},
		{"end of file", "x\ny\nx\n", []PatchChunk{chunk("", []string{"x"}, []string{"z"}, true)}, "x\ny\nz\n", ""},
		{"pure addition at the end", "a\n", []PatchChunk{chunk("", nil, []string{"b"}, false)}, "a\nb\n", ""},
		{"trailing space ignored", "a  \nb\n", []PatchChunk{chunk("", []string{"a", "b"}, []string{"c"}, false)}, "c\n", ""},
		{"no final newline gets one", "a\nb", []PatchChunk{chunk("", []string{"b"}, []string{"c"}, false)}, "a\nc\n", ""},
		{"empty last line stands for the final newline", "a\n", []PatchChunk{chunk("", []string{"a", ""}, []string{"b", ""}, false)}, "b\n", ""},
		{"delete everything", "a\n", []PatchChunk{chunk("", []string{"a"}, nil, false)}, "", ""},
		{"missing lines", "a\n", []PatchChunk{chunk("", []string{"q"}, []string{"r"}, false)}, "", "chunk 1 (patch line 1): failed to find expected lines in f:\nq"},
		{"missing context", "a\n", []PatchChunk{chunk("zz", []string{"a"}, []string{"r"}, false)}, "", "failed to find context 'zz' in f"},
		{"second chunk fails: nothing changes", "a\nb\n", []PatchChunk{chunk("", []string{"a"}, []string{"A"}, false), chunk("", []string{"a"}, []string{"x"}, false)}, "", "chunk 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyChunks("f", tc.content, tc.chunks)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzApplyPatch: a random set of file operations on a random tree, applied
// directly (the oracle: splicing lines by index) and rendered as a patch,
// parsed and applied through ParsePatch and ApplyChunks, give the same tree.
// The fuzzer's bytes also go to ParsePatch as they are: it never panics.
func FuzzApplyPatch(f *testing.F) {
	f.Add(uint64(1), uint64(2), []byte("*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End Patch"))
	f.Add(uint64(7), uint64(99), []byte("<<EOF\n*** Begin Patch\n*** End Patch\nEOF"))
	f.Fuzz(func(t *testing.T, s1, s2 uint64, raw []byte) {
		if ops, err := ParsePatch(string(raw)); err == nil {
			for _, op := range ops {
				if op.Kind == PatchUpdateFile {
					ApplyChunks("f", string(raw), op.Chunks)
				}
			}
		}
		r := rand.New(rand.NewPCG(s1, s2))
		tree, want, patch := randomPatch(r)
		ops, err := ParsePatch(patch)
		if err != nil {
			t.Fatalf("the rendered patch does not parse: %v\n%s", err, patch)
		}
		got := maps(tree)
		for _, op := range ops {
			switch op.Kind {
			case PatchAddFile:
				got[op.Path] = op.Content
			case PatchDeleteFile:
				if _, ok := got[op.Path]; !ok {
					t.Fatalf("delete of a missing %s", op.Path)
				}
				delete(got, op.Path)
			case PatchUpdateFile:
				c, ok := got[op.Path]
				if !ok {
					t.Fatalf("update of a missing %s", op.Path)
				}
				n, err := ApplyChunks(op.Path, c, op.Chunks)
				if err != nil {
					t.Fatalf("%v\npatch:\n%s\nfile:\n%s", err, patch, c)
				}
				delete(got, op.Path)
				dst := op.Path
				if op.MoveTo != "" {
					dst = op.MoveTo
				}
				got[dst] = n
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("patch:\n%s\ngot  %q\nwant %q", patch, got, want)
		}
	})
}

func maps(m map[string]string) map[string]string {
	c := map[string]string{}
	for k, v := range m {
		c[k] = v
	}
	return c
}

// randomPatch makes a tree of files of unique lines, picks operations, and
// returns the tree, the tree after the operations (computed directly), and
// the operations rendered as a patch.
func randomPatch(r *rand.Rand) (tree, want map[string]string, patch string) {
	tree = map[string]string{}
	nfiles := 1 + r.IntN(4)
	uniq := 0
	line := func() string {
		uniq++
		pad := strings.Repeat(" ", r.IntN(2)) // leading space: a context line's own
		return fmt.Sprintf("%sline %d %s", pad, uniq, strings.Repeat("*", r.IntN(3)))
	}
	for i := 0; i < nfiles; i++ {
		var b strings.Builder
		for n := r.IntN(12); n > 0; n-- {
			b.WriteString(line() + "\n")
		}
		tree[fmt.Sprintf("f%d.txt", i)] = b.String()
	}
	want = maps(tree)
	var out strings.Builder
	out.WriteString(patchBegin + "\n")
	names := make([]string, 0, len(tree))
	for k := range tree {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, name := range names {
		switch r.IntN(4) {
		case 0: // delete
			fmt.Fprintf(&out, "%s%s\n", patchDelete, name)
			delete(want, name)
		case 1, 2: // update, maybe moved
			old := strings.Split(strings.TrimSuffix(tree[name], "\n"), "\n")
			if tree[name] == "" {
				old = nil
			}
			newLines, chunks := randomEdits(r, old, line)
			if len(chunks) == 0 {
				continue
			}
			fmt.Fprintf(&out, "%s%s\n", patchUpdate, name)
			dst := name
			if r.IntN(3) == 0 {
				dst = fmt.Sprintf("moved%d.txt", i)
				fmt.Fprintf(&out, "%s%s\n", patchMove, dst)
			}
			out.WriteString(chunks)
			delete(want, name)
			want[dst] = joinLines(newLines)
		}
	}
	for n := r.IntN(3); n > 0; n-- {
		name := fmt.Sprintf("added%d.txt", n)
		var content strings.Builder
		fmt.Fprintf(&out, "%s%s\n", patchAdd, name)
		for k := r.IntN(4); k > 0; k-- {
			l := line()
			content.WriteString(l + "\n")
			out.WriteString("+" + l + "\n")
		}
		want[name] = content.String()
	}
	out.WriteString(patchEnd + "\n")
	return tree, want, out.String()
}

func joinLines(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return strings.Join(l, "\n") + "\n"
}

// randomEdits replaces a few disjoint ranges of old (a range may be empty:
// an insertion) and renders each as a chunk with up to 3 lines of context.
func randomEdits(r *rand.Rand, old []string, line func() string) ([]string, string) {
	var b strings.Builder
	var result []string
	pos := 0
	first := true
	for pos < len(old) || (first && len(old) == 0) {
		start := pos + r.IntN(len(old)-pos+1)
		end := start + r.IntN(min(3, len(old)-start)+1)
		var repl []string
		for n := r.IntN(3); n > 0; n-- {
			repl = append(repl, line())
		}
		ctxBefore := max(pos, start-3)
		ctxAfter := min(len(old), end+3)
		if start == end && len(repl) == 0 || ctxBefore == ctxAfter && len(repl) == 0 {
			break
		}
		if ctxBefore == ctxAfter && len(old) > 0 {
			break // a pure insertion needs context to be placed, but has none here
		}
		if !first || r.IntN(2) == 0 {
			b.WriteString("@@\n")
		}
		first = false
		result = append(result, old[pos:start]...)
		for _, l := range old[ctxBefore:start] {
			b.WriteString(" " + l + "\n")
		}
		for _, l := range old[start:end] {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range repl {
			b.WriteString("+" + l + "\n")
		}
		for _, l := range old[end:ctxAfter] {
			b.WriteString(" " + l + "\n")
		}
		if ctxAfter == len(old) && r.IntN(2) == 0 {
			b.WriteString(patchEOF + "\n")
		}
		result = append(result, repl...)
		result = append(result, old[end:ctxAfter]...)
		pos = ctxAfter
		if len(old) == 0 || r.IntN(3) == 0 {
			break
		}
	}
	result = append(result, old[pos:]...)
	return result, b.String()
}
