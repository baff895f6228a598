package sync

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(r io.Reader, lim Limits) error {
	return ReadPatch(r, lim, func(it *Item) error {
		_, err := io.Copy(io.Discard, it.Body)
		return err
	})
}

// Each bound of a patch reader, exceeded by one.
func TestPatchLimits(t *testing.T) {
	lim := PullLimits(100)
	long := strings.Repeat("d/", MaxPathBytes/2) + "f"
	for _, c := range []struct {
		name    string
		lim     Limits
		entries []tarEntry
		want    string
		size    bool // a *SizeError
	}{
		{"at the total", lim, []tarEntry{tfile("a", strings.Repeat("x", 60)), tfile("b", strings.Repeat("x", 40))}, "", false},
		{"over the total", lim, []tarEntry{tfile("a", strings.Repeat("x", 60)), tfile("b", strings.Repeat("x", 41))}, "over 100 bytes", true},
		{"one file over", lim, []tarEntry{tfile("a", strings.Repeat("x", 101))}, "a file of 101 bytes is over the 100-byte limit", true},
		{"path over PATH_MAX", DefaultLimits, []tarEntry{tfile(long, "")}, "over the 4096-byte limit (PATH_MAX)", false},
		{"name over NAME_MAX", DefaultLimits, []tarEntry{tfile("d/"+strings.Repeat("n", 256), "")}, "over the 255-byte limit (NAME_MAX)", false},
		{"name at NAME_MAX", DefaultLimits, []tarEntry{tfile("d/"+strings.Repeat("n", 255), "")}, "", false},
		{"too many entries", Limits{MaxEntries: 2, MaxFileSize: 10, MaxTotal: 10, MaxNameBytes: 100}, []tarEntry{tfile("a", ""), tfile("b", ""), tfile("c", "")}, "more than 2 entries", false},
		{"names over their bytes", Limits{MaxEntries: 10, MaxFileSize: 10, MaxTotal: 10, MaxNameBytes: 5}, []tarEntry{tfile("abc", ""), tfile("def", "")}, "paths and link targets are over 5 bytes", false},
		{"link targets count", Limits{MaxEntries: 10, MaxFileSize: 10, MaxTotal: 10, MaxNameBytes: 10}, []tarEntry{tsymlink("l", strings.Repeat("t", 10))}, "paths and link targets are over 10 bytes", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := readAll(bytes.NewReader(mkTar(t, c.entries...)), c.lim)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *PatchError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want a *PatchError with %q", err, c.want)
			}
			var se *SizeError
			if errors.As(err, &se) != c.size {
				t.Fatalf("err %v: SizeError %v, want %v", err, se != nil, c.size)
			}
		})
	}
}

// One pull's patches (one per code dir) share one total.
func TestPullTotalAcrossPatches(t *testing.T) {
	lim := PullLimits(100)
	lim.Total = new(int64)
	stream := append(mkTar(t, tfile("a", strings.Repeat("x", 70))), mkTar(t, tfile("a", strings.Repeat("x", 70)))...)
	r := bytes.NewReader(stream)
	if err := readAll(r, lim); err != nil {
		t.Fatalf("first patch: %v", err)
	}
	var se *SizeError
	if err := readAll(r, lim); !errors.As(err, &se) || se.AtLeast != 140 || se.Limit != 100 {
		t.Fatalf("second patch: %v, want a SizeError of at least 140 over 100", err)
	}
}

// Zeros without end after the last patch are refused, not read forever.
func TestExpectEndBounded(t *testing.T) {
	if err := ExpectEnd(bytes.NewReader(make([]byte, 10240))); err != nil {
		t.Fatalf("a record's padding refused: %v", err)
	}
	n := 0
	endless := readerFunc(func(p []byte) (int, error) { clear(p); n += len(p); return len(p), nil })
	err := ExpectEnd(endless)
	if err == nil || !strings.Contains(err.Error(), "padding") {
		t.Fatalf("endless zeros: %v", err)
	}
	if n > 2*MaxPadding {
		t.Fatalf("read %d bytes of padding", n)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
