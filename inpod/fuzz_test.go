package inpod

import (
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
	for _, s := range []string{"serve", "version", "kill abc", "kill ../../etc", "mux", "serve\x00", "kill a\tb"} {
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
		default:
			t.Fatalf("%q accepted as %q", line, args)
		}
	})
}
