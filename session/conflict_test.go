package session

import "testing"

func TestConflictOriginal(t *testing.T) {
	for _, tc := range []struct{ name, aside, want string }{
		{"first copy", "/c/a.txt.sbx-conflict", "/c/a.txt"},
		{"numbered copy", "/c/a.txt.sbx-conflict-12", "/c/a.txt"},
		{"a directory's copy", "/c/d.sbx-conflict", "/c/d"},
		{"suffix in a parent stays", "/c/x.sbx-conflict/y.sbx-conflict", "/c/x.sbx-conflict/y"},
		{"not a number after the dash", "/c/a.sbx-conflict-x", "/c/a.sbx-conflict-x"},
		{"dash alone", "/c/a.sbx-conflict-", "/c/a.sbx-conflict-"},
		{"no suffix", "/c/a.txt", "/c/a.txt"},
	} {
		if got := ConflictOriginal(tc.aside); got != tc.want {
			t.Errorf("%s: ConflictOriginal(%q) = %q, want %q", tc.name, tc.aside, got, tc.want)
		}
	}
}
