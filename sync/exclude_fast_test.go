package sync

import (
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// The matcher's fast shapes (a literal path, **/NAME, **/PREFIX*) decide as
// doublestar itself does, the independent oracle, for any pattern and path.
func FuzzExcludeFastPath(f *testing.F) {
	for _, p := range append(DefaultExcludes, "*.log", "build/", "/dist", "**/x*y", "a/**/b", "!keep", `\#lit`, "x[ab]", "{a,b}", "é*", "**/", "\xef*") {
		for _, path := range []string{"x", "a/b", ".sbx", ".sbx/x", "a/.sbx-tmp-1", ".sbx-tmp-", "node_modules/.cache", "a/node_modules/.cache",
			".git/index.lock", "sub/.DS_Store", "a/__pycache__", "é", "a/éa", "\xff", "a/\xffb", "\xc3", ""} {
			f.Add(p, path)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		m, err := NewMatcher([]string{pattern})
		if err != nil {
			return
		}
		for _, r := range m.rules {
			if got, want := r.match(p), doublestar.MatchUnvalidated(r.glob, p); got != want {
				t.Fatalf("rule %q (kind %d, %q) on %q: fast path says %v, doublestar %v", r.glob, r.kind, r.lit, p, got, want)
			}
		}
	})
}

// The default excludes all take a fast shape: they are asked about every
// entry of every scan.
func TestDefaultExcludesFast(t *testing.T) {
	m, err := NewMatcher(DefaultExcludes)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.rules {
		if r.kind == matchGlob {
			t.Errorf("default exclude %q is matched by doublestar", r.glob)
		}
	}
}
