package hostd

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// boundedLog is a daemon's log file (its stderr: hostd.log, which its
// starter opened for appending): past max bytes it starts anew, as the
// next daemon's starter would. A daemon lives as long as commands come,
// and each may add a line the sandbox chooses to cause (a refused cwd
// report, a conflict; every round trip at debug level), so the bound
// checked at a start alone was no bound.
type boundedLog struct {
	mu   sync.Mutex
	f    *os.File
	max  int64
	size int64
}

// newBoundedLog bounds f when it is a regular file; another (a terminal or
// pipe, a daemon run by hand) is written as it is.
func newBoundedLog(f *os.File, max int64) io.Writer {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return f
	}
	return &boundedLog{f: f, max: max, size: fi.Size()}
}

func (l *boundedLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size+int64(len(b)) > l.max {
		// Opened for appending: the next write lands at the new end.
		if err := l.f.Truncate(0); err == nil {
			n, _ := fmt.Fprintf(l.f, "hostd.log started anew: it reached its bound of %d bytes\n", l.max)
			l.size = int64(n)
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	return n, err
}
