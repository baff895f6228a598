package tools

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// cutOracle is what a capture of data must render, computed the slow and
// obvious way: the whole text decoded into characters, then cut. For valid
// UTF-8 it is exact at any size; for invalid bytes it is exact while the
// capture kept everything (each invalid run becomes one U+FFFD, as
// strings.ToValidUTF8 does, so the character count is that of the repaired
// text).
func cutOracle(data []byte, limit int) (string, bool) {
	r := []rune(strings.ToValidUTF8(string(data), "\uFFFD"))
	if len(r) <= limit {
		return string(r), false
	}
	half := limit / 2
	return string(r[:half]) + fmt.Sprintf("\n\n... [%d characters truncated] ...\n\n", len(r)-limit) + string(r[len(r)-(limit-half):]), true
}

// firstDiff says where got and want part, with a little of each around it.
func firstDiff(got, want string) string {
	g, w := []rune(got), []rune(want)
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	around := func(r []rune) string { return string(r[max(0, i-20):min(len(r), i+40)]) }
	return fmt.Sprintf("%d and %d characters, first difference at %d: got %q, want %q", len(g), len(w), i, around(g), around(w))
}

// write feeds data to c in chunks of the given sizes, cycling.
func write(c *capture, data []byte, chunks []int) {
	for i := 0; len(data) > 0; i++ {
		k := min(max(chunks[i%len(chunks)], 1), len(data))
		c.Write(data[:k])
		data = data[k:]
	}
}

func checkCut(t *testing.T, data []byte, limit int, chunks []int) {
	t.Helper()
	c := newCapture(limit)
	write(c, data, chunks)
	got, truncated := c.render(limit)
	if !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 rendered (%d bytes in, chunks %v)", len(data), chunks)
	}
	if n := utf8.RuneCountInString(got); n > limit+len(marker(1<<40)) {
		t.Fatalf("%d characters rendered for a limit of %d", n, limit)
	}
	if c.total != int64(len(data)) {
		t.Fatalf("total %d, wrote %d", c.total, len(data))
	}
	want, wantTrunc := cutOracle(data, limit)
	if utf8.Valid(data) || c.tailSkip == 0 {
		if got != want || truncated != wantTrunc {
			t.Fatalf("limit %d, chunks %v, %d bytes in: truncated %v, want %v; %s", limit, chunks, len(data), truncated, wantTrunc, firstDiff(got, want))
		}
	}
}

// FuzzCaptureCut holds the capture's cut (bounded head and tail windows,
// characters counted as the bytes stream by) to the oracle that keeps it
// all, for any bytes, limit and write sizes.
func FuzzCaptureCut(f *testing.F) {
	f.Add([]byte("hello"), uint8(3), uint8(7), uint8(1))
	f.Add([]byte("\xff\xfeé\x00"), uint8(1), uint8(2), uint8(3))
	f.Add(bytes.Repeat([]byte("aé✓😀"), 200), uint8(10), uint8(13), uint8(64))
	f.Add(bytes.Repeat([]byte("😀"), 300), uint8(4), uint8(1), uint8(255))
	f.Add(append(bytes.Repeat([]byte("x"), 150), "\xe2\x9c"...), uint8(20), uint8(37), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, limit, c1, c2 uint8) {
		l := int(limit)%60 + 2
		checkCut(t, data, l, []int{int(c1), int(c2)})
		// The same bytes as valid UTF-8: exact at any size.
		valid := []byte(strings.ToValidUTF8(string(data), "\uFFFD"))
		checkCut(t, valid, l, []int{int(c2), int(c1)})
	})
}

// TestCaptureCutWindows covers, at OutputLimit, the ways a write meets the
// head and tail windows: one write larger than the tail, many small ones,
// characters of every width cut by each window edge.
func TestCaptureCutWindows(t *testing.T) {
	mixed := []byte(strings.Repeat("a é ✓ 😀 line\n", 40000)) // 720 kB
	tests := []struct {
		name   string
		data   []byte
		chunks []int
	}{
		{"one huge write", mixed, []int{len(mixed)}},
		{"pipe-sized writes", mixed, []int{65536}},
		{"odd writes", mixed, []int{4093, 1, 3, 70001}},
		{"byte at a time", mixed[:300000], []int{1}},
		{"just over the limit", []byte(strings.Repeat("😀", OutputLimit+1)), []int{999}},
		{"exactly the limit", []byte(strings.Repeat("é", OutputLimit)), []int{4096}},
		{"invalid bytes kept whole", append([]byte("\xff\xfe"), mixed[:1000]...), []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCut(t, tt.data, OutputLimit, tt.chunks) })
	}
}

// FuzzContinuationBytes holds the word-at-a-time count to the byte-by-byte
// definition (utf8.RuneStart).
func FuzzContinuationBytes(f *testing.F) {
	f.Add([]byte("héllo ✓ 😀 \xff\x80\xbf\xc0"))
	f.Add(bytes.Repeat([]byte{0x80, 0x7f, 0xbf, 0xc0, 0xff, 0x40}, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := 0
		for _, b := range data {
			if !utf8.RuneStart(b) {
				want++
			}
		}
		if got := continuationBytes(data); got != want {
			t.Fatalf("continuationBytes(%q) = %d, want %d", data, got, want)
		}
	})
}

// BenchmarkCaptureWrite is the bash tool's output path on the host: pipe
// reads of 64 KiB into the capture.
func BenchmarkCaptureWrite(b *testing.B) {
	chunk := []byte(strings.Repeat("héllo wörld — ✓ 0123456789 abcdefghijklmnopqrstuvwxyz\n", 1200)[:65536])
	b.SetBytes(int64(len(chunk)))
	c := newCapture(OutputLimit)
	for b.Loop() {
		c.Write(chunk)
	}
}
