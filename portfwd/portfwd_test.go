package portfwd

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
		err  string
	}{
		{in: "8080", want: Spec{8080, 8080}},
		{in: "8080:3000", want: Spec{8080, 3000}},
		{in: "0:3000", want: Spec{0, 3000}},
		{in: "0", err: "needs a sandbox port"},
		{in: "8080:0", err: "out of range"},
		{in: "70000", err: "out of range"},
		{in: "80a", err: "not a port number"},
		{in: ":3000", err: "not a port number"},
		{in: "8080:", err: "not a port number"},
		{in: "8080:3000:1", err: "not a port number"},
		{in: "-1", err: "not a port number"},
		{in: "123456", err: "not a port number"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v %v, want %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}
