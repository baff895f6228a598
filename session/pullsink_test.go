package session

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestPullSink: the pull reaches read whole and in order, however it is
// cut into writes and whichever side of the bound it ends; at most max
// bytes are ever held in memory (past them read streams in a goroutine); a
// refusal by read makes the sandbox's further writes fail; nothing is
// taken after finish.
func TestPullSink(t *testing.T) {
	const bound = 1000
	for _, row := range []struct {
		name   string
		size   int
		chunks int
	}{
		{"nothing", 0, 1},
		{"one byte", 1, 1},
		{"at the bound, one write", bound, 1},
		{"at the bound, many writes", bound, 7},
		{"one past the bound, one write", bound + 1, 1},
		{"one past the bound, byte by byte", bound + 1, bound + 1},
		{"far past the bound", 50 * bound, 13},
	} {
		t.Run(row.name, func(t *testing.T) {
			want := make([]byte, row.size)
			for i := range want {
				want[i] = byte(i*31 + 7)
			}
			var got []byte
			reads := 0
			p := &pullSink{max: bound, read: func(r io.Reader) error {
				reads++
				var err error
				got, err = io.ReadAll(r)
				return err
			}}
			step := max(1, (row.size+row.chunks-1)/row.chunks)
			for off := 0; off == 0 || off < row.size; off += step {
				end := min(off+step, row.size)
				n, err := p.Write(want[off:end])
				if err != nil || n != end-off {
					t.Fatalf("write [%d:%d]: %d, %v", off, end, n, err)
				}
				p.mu.Lock()
				held := len(p.held)
				p.mu.Unlock()
				if held > bound {
					t.Fatalf("after %d bytes, %d are held in memory, over the bound of %d", end, held, bound)
				}
			}
			if err := p.finish(); err != nil {
				t.Fatal(err)
			}
			if reads != 1 || !bytes.Equal(got, want) {
				t.Fatalf("read %d times, got %d bytes, want %d in one read", reads, len(got), len(want))
			}
			if _, err := p.Write([]byte("late")); err == nil {
				t.Error("a write after finish was taken")
			}
		})
	}
	t.Run("a refusal stops the stream", func(t *testing.T) {
		refused := errors.New("over the disk limit")
		p := &pullSink{max: bound, read: func(r io.Reader) error {
			io.CopyN(io.Discard, r, 10)
			return refused
		}}
		if _, err := p.Write(make([]byte, bound+1)); err != nil && !errors.Is(err, refused) {
			t.Fatal(err)
		}
		var err error
		for range 100 {
			if _, err = p.Write(make([]byte, bound)); err != nil {
				break
			}
		}
		if !errors.Is(err, refused) {
			t.Errorf("writes after the refusal: %v, want the refusal", err)
		}
		if err := p.finish(); !errors.Is(err, refused) {
			t.Errorf("finish: %v, want the refusal", err)
		}
	})
	t.Run("a refusal of a held pull", func(t *testing.T) {
		refused := errors.New("a rule refused it")
		p := &pullSink{max: bound, read: func(r io.Reader) error { return refused }}
		p.Write([]byte("small"))
		if err := p.finish(); !errors.Is(err, refused) {
			t.Errorf("finish: %v, want the refusal", err)
		}
	})
}
