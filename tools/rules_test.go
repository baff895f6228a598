package tools

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/sbx-sh/sbx/sandbox/sandboxtest"
)

func TestReplace(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		old, new string
		all      bool
		want     string
		wantN    int
		wantErr  string
	}{
		{name: "single match", content: "a b c", old: "b", new: "B", want: "a B c", wantN: 1},
		{name: "absent", content: "a b c", old: "x", new: "y", wantErr: ErrTextNotFound},
		{name: "two matches without replace_all", content: "x x", old: "x", new: "y", wantErr: ErrTextMultiple(2)},
		{name: "three matches with replace_all", content: "x-x-x", old: "x", new: "yy", all: true, want: "yy-yy-yy", wantN: 3},
		{name: "same strings", content: "x", old: "x", new: "x", wantErr: ErrTextSame},
		{name: "empty old", content: "x", old: "", new: "y", wantErr: "old_string is empty"},
		{name: "delete", content: "keep drop keep", old: " drop", new: "", want: "keep keep", wantN: 1},
		{name: "crlf file, lf strings", content: "one\r\ntwo\r\nthree\r\n", old: "one\ntwo", new: "1\n2\n", want: "1\r\n2\r\n\r\nthree\r\n", wantN: 1},
		{name: "crlf file, crlf strings", content: "a\r\nb\r\n", old: "a\r\nb", new: "c\r\nd", want: "c\r\nd\r\n", wantN: 1},
		{name: "crlf file, single line", content: "a\r\nb\r\n", old: "b", new: "c\nd", want: "a\r\nc\nd\r\n", wantN: 1},
		{name: "lf file stays lf", content: "a\nb\n", old: "a\nb", new: "x\ny", want: "x\ny\n", wantN: 1},
		{name: "overlapping counts once", content: "aaa", old: "aa", new: "b", want: "ba", wantN: 1},
		{name: "binary-safe", content: "\x00\xff\x00", old: "\xff", new: "\xfe", want: "\x00\xfe\x00", wantN: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n, _, err := Replace(tt.content, tt.old, tt.new, tt.all)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || n != tt.wantN {
				t.Fatalf("got %q, %d, %v; want %q, %d", got, n, err, tt.want, tt.wantN)
			}
		})
	}
}

func TestMultipleMatchesText(t *testing.T) {
	want := "Found 3 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance."
	if got := ErrTextMultiple(3); got != want {
		t.Fatalf("got %q", got)
	}
}

func TestCapture(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		limit     int
		want      string
		truncated bool
	}{
		{name: "short", writes: []string{"hello\n"}, limit: 10, want: "hello\n"},
		{name: "exact", writes: []string{"0123456789"}, limit: 10, want: "0123456789"},
		{name: "cut in memory", writes: []string{"0123456789AB"}, limit: 10, want: "01234" + marker(2) + "789AB", truncated: true},
		{name: "invalid utf-8", writes: []string{"a\xffb"}, limit: 10, want: "a\uFFFDb"},
		{name: "multibyte counted as characters", writes: []string{"ééééé"}, limit: 5, want: "ééééé"},
		{name: "split writes", writes: []string{"é"[:1], "é"[1:]}, limit: 5, want: "é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.limit)
			for _, w := range tt.writes {
				c.Write([]byte(w))
			}
			got, tr := c.render(tt.limit)
			if got != tt.want || tr != tt.truncated {
				t.Fatalf("got %q (%v), want %q (%v)", got, tr, tt.want, tt.truncated)
			}
		})
	}
}

func TestCaptureHuge(t *testing.T) {
	c := newCapture(OutputLimit)
	line := strings.Repeat("x", 99) + "\n"
	for i := 0; i < 100000; i++ { // 10 MB
		c.Write([]byte(line))
	}
	c.Write([]byte("THE END\n"))
	got, tr := c.render(OutputLimit)
	if !tr || !strings.HasSuffix(got, "THE END\n") || !strings.HasPrefix(got, "xxx") {
		t.Fatalf("truncated=%v head %q tail %q", tr, got[:10], got[len(got)-10:])
	}
	if !strings.Contains(got, "... [9970008 characters truncated] ...") {
		t.Fatalf("marker missing or wrong: %q", got[14990:15060])
	}
	if n := utf8.RuneCountInString(got); n > OutputLimit+100 {
		t.Fatalf("%d characters", n)
	}
}

func FuzzCapture(f *testing.F) {
	f.Add([]byte("hello"), 3)
	f.Add([]byte("\xff\xfeé\x00"), 1)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 || chunk > 64 {
			chunk = 7
		}
		c := newCapture(20)
		for len(data) > 0 {
			k := min(chunk, len(data))
			c.Write(data[:k])
			data = data[k:]
		}
		got, _ := c.render(20)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8: %q", got)
		}
		if n := utf8.RuneCountInString(got); n > 20+len(marker(1<<40)) {
			t.Fatalf("%d characters: %q", n, got)
		}
	})
}

func TestLines(t *testing.T) {
	long := strings.Repeat("y", MaxLineChars+5)
	tests := []struct {
		name     string
		content  string
		from, to int
		want     string
	}{
		{name: "two lines", content: "a\nb\n", from: 1, to: 2000, want: "     1\ta\n     2\tb"},
		{name: "no final newline", content: "a\nb", from: 1, to: 2000, want: "     1\ta\n     2\tb"},
		{name: "offset and limit", content: "1\n2\n3\n4\n", from: 2, to: 3, want: "     2\t2\n     3\t3\n(showing lines 2-3 of 4; use offset and limit to read more)"},
		{name: "empty", content: "", from: 1, to: 2000, want: "(/f exists but is empty)"},
		{name: "past the end", content: "a\n", from: 5, to: 10, want: "(/f has 1 lines; offset 5 is past its end)"},
		{name: "crlf", content: "a\r\nb\r\n", from: 1, to: 2000, want: "     1\ta\n     2\tb"},
		{name: "long line cut", content: long + "\n", from: 1, to: 1, want: "     1\t" + long[:MaxLineChars] + "... [line truncated]"},
		{name: "blank lines kept", content: "\n\nx\n", from: 1, to: 9, want: "     1\t\n     2\t\n     3\tx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &lines{from: tt.from, to: tt.to}
			for _, b := range []byte(tt.content) { // byte at a time: the worst split
				l.Write([]byte{b})
			}
			if got := l.render("/f"); got != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestImageType(t *testing.T) {
	tests := map[string]string{
		"\x89PNG\r\n\x1a\nrest":       "image/png",
		"\xff\xd8\xff\xe0":            "image/jpeg",
		"GIF89a..":                    "image/gif",
		"GIF87a..":                    "image/gif",
		"RIFF\x00\x00\x00\x00WEBPVP8": "image/webp",
		"RIFF\x00\x00\x00\x00WAVE":    "",
		"hello":                       "",
	}
	for in, want := range tests {
		if got := imageType([]byte(in)); got != want {
			t.Errorf("imageType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckPath(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "/a/b", want: "/a/b"},
		{in: "/a/../b/", want: "/b"},
		{in: "a/b", err: "must be an absolute path"},
		{in: "", err: "empty"},
		{in: "/a\x00b", err: "NUL"},
	}
	for _, tt := range tests {
		got, err := checkPath(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("checkPath(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if got != tt.want || err != nil {
			t.Errorf("checkPath(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func TestRing(t *testing.T) {
	r := &ring{max: 4}
	r.Write([]byte("ab"))
	if out, d := r.next(); string(out) != "ab" || d != 0 {
		t.Fatalf("%q %d", out, d)
	}
	r.Write([]byte("cdefghijk"))
	out, d := r.next()
	if !strings.HasSuffix("cdefghijk", string(out)) || int64(len(out))+d != 9 {
		t.Fatalf("%q %d", out, d)
	}
	if out, d := r.next(); len(out) != 0 || d != 0 {
		t.Fatalf("%q %d", out, d)
	}
}

// TestStdioSurvivesBadInput feeds the tolerant transport lines the SDK's
// own would end the connection on.
func TestStdioSurvivesBadInput(t *testing.T) {
	in := strings.Join([]string{
		`not json`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"1.0","id":7,"method":"ping"}`,
		``,
		`{"jsonrpc":"2.0","id":8,"method":"ping"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	// No drain: the call read is never answered here.
	conn, err := (&StdioTransport{In: strings.NewReader(in), Out: &out, Drain: time.Nanosecond}).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := conn.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if req, ok := msg.(*jsonrpc.Request); !ok || req.ID.Raw() != int64(8) {
		t.Fatalf("first message through: %#v", msg)
	}
	if _, err := conn.Read(t.Context()); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
	sc := bufio.NewScanner(&out)
	var codes []string
	for sc.Scan() {
		var resp struct {
			ID    any `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		codes = append(codes, strings.TrimSpace(strings.Join([]string{jsonString(resp.ID), itoa(resp.Error.Code)}, " ")))
	}
	if got, want := strings.Join(codes, ","), "null -32700,null -32600,7 -32600"; got != want {
		t.Fatalf("error responses %s, want %s", got, want)
	}
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }
func itoa(n int) string       { b, _ := json.Marshal(n); return string(b) }

// FuzzStdio feeds the stdio transport arbitrary input: it never panics,
// every message it passes on is a valid JSON-RPC message, and every line it
// answers gets one JSON-RPC error response.
func FuzzStdio(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `garbage` + "\n"))
	f.Add([]byte(`[1,2]` + "\n" + `{"jsonrpc":"2.0","id":"x","method":7}`))
	f.Add([]byte("\n\n{\"jsonrpc\":\"2.0\",\"id\":null}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		conn, err := (&StdioTransport{In: bytes.NewReader(data), Out: &out, Drain: time.Nanosecond}).Connect(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := conn.Read(t.Context())
			if err != nil {
				break
			}
			if _, err := jsonrpc.EncodeMessage(msg); err != nil {
				t.Fatalf("passed on a message it cannot encode: %v", err)
			}
		}
		conn.Close()
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var resp struct {
				JSONRPC string `json:"jsonrpc"`
				Error   *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" || resp.Error == nil {
				t.Fatalf("bad error response %q: %v", sc.Bytes(), err)
			}
		}
	})
}

// TestStdioEOFWaitsForAnswers: the end of the input reaches the server only
// after every call read has been answered, or cancelled by the client.
func TestStdioEOFWaitsForAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		answer   bool
	}{
		{"answered", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n", true},
		{"cancelled by the client", `{"jsonrpc":"2.0","id":"a","method":"ping"}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}` + "\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out sandboxtest.Buffer
			conn, err := (&StdioTransport{In: strings.NewReader(tc.in), Out: &out}).Connect(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			msg, err := conn.Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			req := msg.(*jsonrpc.Request)
			if !tc.answer {
				if _, err := conn.Read(t.Context()); err != nil {
					t.Fatalf("the cancellation: %v", err)
				}
			}
			end := make(chan error, 1)
			go func() {
				_, err := conn.Read(t.Context())
				end <- err
			}()
			if tc.answer {
				select {
				case err := <-end:
					t.Fatalf("the end came before the answer: %v", err)
				default:
				}
				resp := &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)}
				if err := conn.Write(t.Context(), resp); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-end:
				if err != io.EOF {
					t.Fatalf("at the end: %v, want EOF", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no EOF after every call was answered")
			}
		})
	}
}
