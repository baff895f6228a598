package tools

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// OutputLimit is how many characters of a command's output a result shows:
// past it, the head and the tail are kept, with a line saying how much was cut.
const OutputLimit = 30000

// capture keeps the head and the tail of a stream with bounded memory, so a
// command printing gigabytes costs no more than one printing a page. It is
// safe for concurrent writers.
type capture struct {
	mu       sync.Mutex
	headMax  int
	tailMax  int
	head     []byte
	tail     []byte // the last bytes after head filled up; up to 2*tailMax before compaction
	total    int64  // bytes written
	chars    int64  // characters written (bytes that start a UTF-8 sequence)
	tailSkip int64  // bytes written after head and no longer in tail
}

// newCapture keeps enough bytes for limit characters of head and of tail.
func newCapture(limit int) *capture {
	half := limit / 2 * utf8.UTFMax
	return &capture{headMax: half, tailMax: half}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	for _, b := range p {
		if !utf8.RuneStart(b) {
			continue
		}
		c.chars++
	}
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailMax {
		drop := len(c.tail) - c.tailMax
		c.tailSkip += int64(drop)
		c.tail = append(c.tail[:0:0], c.tail[drop:]...)
	}
	return n, nil
}

// render returns the captured text, invalid UTF-8 replaced, cut to limit
// characters (head and tail around a marker line) when longer.
func (c *capture) render(limit int) (text string, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tailSkip == 0 {
		return cutMiddle(strings.ToValidUTF8(string(c.head)+string(c.tail), "\uFFFD"), limit)
	}
	half := limit / 2
	h := firstChars(strings.ToValidUTF8(string(c.head), "\uFFFD"), half)
	tailBytes := c.tail
	for len(tailBytes) > 0 && !utf8.RuneStart(tailBytes[0]) {
		tailBytes = tailBytes[1:] // a character cut in two by the window
	}
	t := lastChars(strings.ToValidUTF8(string(tailBytes), "\uFFFD"), limit-half)
	cut := c.chars - int64(utf8.RuneCountInString(h)) - int64(utf8.RuneCountInString(t))
	return h + marker(cut) + t, true
}

// cutMiddle shortens s to limit characters, keeping its head and tail.
func cutMiddle(s string, limit int) (string, bool) {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, false
	}
	half := limit / 2
	return firstChars(s, half) + marker(int64(n-limit)) + lastChars(s, limit-half), true
}

func marker(cut int64) string {
	return fmt.Sprintf("\n\n... [%d characters truncated] ...\n\n", cut)
}

func firstChars(s string, n int) string {
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

func lastChars(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := len(s)
	for c := 0; c < n && i > 0; c++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// ring keeps the last max bytes of a background job's output and where each
// reader left off.
type ring struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64 // bytes ever written
	read  int64 // offset bash_output has returned up to
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total += int64(len(p))
	r.buf = append(r.buf, p...)
	if len(r.buf) > 2*r.max {
		r.buf = append(r.buf[:0:0], r.buf[len(r.buf)-r.max:]...)
	}
	return len(p), nil
}

// next returns the output since the last call and how many bytes of it were
// dropped because the buffer had moved past them.
func (r *ring) next() (out []byte, dropped int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.total - int64(len(r.buf))
	if r.read < start {
		dropped = start - r.read
		r.read = start
	}
	out = append([]byte(nil), r.buf[r.read-start:]...)
	r.read = r.total
	return out, dropped
}
