package tools

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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
	tail     []byte // the last bytes after head filled up: tailMax to 2*tailMax of them once tailSkip > 0
	total    int64  // bytes written
	chars    int64  // characters written (bytes that start a UTF-8 sequence)
	tailSkip int64  // bytes written after head and no longer in tail
}

// newCapture keeps enough bytes for the characters render shows of the head
// (limit/2) and of the tail (the rest): each is at most utf8.UTFMax bytes,
// and a tail window that starts inside a character still holds enough
// whole ones after it.
func newCapture(limit int) *capture {
	half := limit / 2
	return &capture{headMax: half * utf8.UTFMax, tailMax: (limit - half) * utf8.UTFMax}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	c.chars += int64(n - continuationBytes(p))
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	// The tail keeps at least tailMax bytes once anything was dropped, in
	// one buffer of 2*tailMax: no allocation per write, and each byte is
	// moved at most once more than it is written.
	if len(p) >= c.tailMax {
		c.tailSkip += int64(len(c.tail) + len(p) - c.tailMax)
		p = p[len(p)-c.tailMax:]
		c.tail = c.tail[:0]
	} else if len(c.tail)+len(p) > 2*c.tailMax {
		drop := len(c.tail) + len(p) - c.tailMax
		c.tailSkip += int64(drop)
		c.tail = c.tail[:copy(c.tail, c.tail[drop:])]
	}
	if c.tail == nil {
		c.tail = make([]byte, 0, 2*c.tailMax)
	}
	c.tail = append(c.tail, p...)
	return n, nil
}

// continuationBytes counts the bytes of p that continue a UTF-8 sequence
// (10xxxxxx): the characters of p are the others. Eight bytes at a time: a
// byte's top bit set and its next bit clear.
func continuationBytes(p []byte) int {
	const high = 0x8080808080808080
	n := 0
	for len(p) >= 32 {
		a := binary.LittleEndian.Uint64(p)
		b := binary.LittleEndian.Uint64(p[8:])
		c := binary.LittleEndian.Uint64(p[16:])
		d := binary.LittleEndian.Uint64(p[24:])
		n += bits.OnesCount64(a&^(a<<1)&high) + bits.OnesCount64(b&^(b<<1)&high) +
			bits.OnesCount64(c&^(c<<1)&high) + bits.OnesCount64(d&^(d<<1)&high)
		p = p[32:]
	}
	for len(p) >= 8 {
		a := binary.LittleEndian.Uint64(p)
		n += bits.OnesCount64(a &^ (a << 1) & high)
		p = p[8:]
	}
	for _, b := range p {
		if b&0xC0 == 0x80 {
			n++
		}
	}
	return n
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
