package inpod

import (
	"fmt"
	"strings"
	"testing"
)

// The mux runs a child for each stream's first line: only the helper's own
// sub-commands may pass, and a kill's id may not name a path.
func TestMuxSubcommand(t *testing.T) {
	for line, ok := range map[string]bool{
		"serve": true, "version": true, "kill abc123": true, " serve ": true,
		"": false, "mux": false, "serve x": false, "kill": false, "kill ../x": false, "kill a/b": false,
		"kill .": false, "kill a b": false, "sh -c id": false, "__inpod serve": false, "SERVE": false,
	} {
		_, err := muxSubcommand(line)
		if (err == nil) != ok {
			t.Errorf("%q: err = %v, want accepted=%v", line, err, ok)
		}
	}
}

func FuzzMuxSubcommand(f *testing.F) {
	for _, s := range []string{"serve", "version", "kill abc", "kill ../../etc", "mux", "serve\x00", "kill a\tb", "dial 8080", "dial 0", "dial 65536", "dial 08", "dial +1", "dial 1 2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args, err := muxSubcommand(line)
		if err != nil {
			return
		}
		switch {
		case len(args) == 1 && (args[0] == "serve" || args[0] == "version"):
		case len(args) == 2 && args[0] == "kill" && !strings.ContainsAny(args[1], "/.") && args[1] != "":
		case len(args) == 2 && args[0] == "dial" && portOracle(args[1]):
		default:
			t.Fatalf("%q accepted as %q", line, args)
		}
	})
}

// portOracle is what a dial request's port must be, said another way: the
// decimal spelling of a number from 1 to 65535, as fmt prints it.
func portOracle(f string) bool {
	var n int
	if _, err := fmt.Sscan(f, &n); err != nil {
		return false
	}
	return n >= 1 && n <= 65535 && fmt.Sprint(n) == f
}
