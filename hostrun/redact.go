package hostrun

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// maxLine bounds how much output the redactor holds while waiting for the end
// of a line.
const maxLine = 64 << 10

// redactor passes output through line by line (a line ends at \n or \r, as
// git's progress does), replacing the userinfo of every "scheme://user:pass@"
// with "<redacted>": GIT_TRACE prints remote URLs as configured, and a
// credential embedded in one must not reach the agent. The mutex is shared by
// a plan's stdout and stderr, so concurrent writers never interleave a line.
type redactor struct {
	mu  *sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.buf = append(r.buf, p...)
	start := 0
	for {
		i := bytes.IndexAny(r.buf[start:], "\n\r")
		if i < 0 {
			break
		}
		r.emit(r.buf[start : start+i+1])
		start += i + 1
	}
	r.buf = append(r.buf[:0], r.buf[start:]...)
	if len(r.buf) > maxLine {
		r.emit(r.buf)
		r.buf = r.buf[:0]
	}
	if r.err != nil {
		return 0, r.err
	}
	return len(p), nil
}

func (r *redactor) emit(line []byte) {
	if r.err == nil {
		_, r.err = io.WriteString(r.w, redactLine(string(line)))
	}
}

func (r *redactor) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 {
		r.emit(r.buf)
		r.buf = nil
	}
	return r.err
}

// redactLine replaces the userinfo of each URL authority in s.
func redactLine(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, "/ \t\r\n'\"<>`")
		if end < 0 {
			end = len(s)
		}
		auth := s[:end]
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			b.WriteString("<redacted>")
			auth = auth[at:]
		}
		b.WriteString(auth)
		s = s[end:]
	}
}
