package hostd

import (
	"encoding/json"
	"path"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The oracle: what a request may be, said again with regular expressions
// and the path package, apart from ParseRequest's own checks.
var (
	nameOK = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$`)
	keyOK  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envOK  = regexp.MustCompile(`^[^=\x00]+=[^\x00]*$`)
)

func acceptable(r Request) bool {
	if !nameOK.MatchString(r.Session) || !keyOK.MatchString(r.Key) {
		return false
	}
	switch r.Op {
	case "status", "stop":
		return r.Command == "" && r.Dir == "" && len(r.Env) == 0
	case "exec":
	default:
		return false
	}
	if r.Command == "" || strings.Contains(r.Command, "\x00") {
		return false
	}
	if !path.IsAbs(r.Dir) || path.Clean(r.Dir) != r.Dir || strings.Contains(r.Dir, "\x00") {
		return false
	}
	if len(r.Env) > maxEnv {
		return false
	}
	for _, kv := range r.Env {
		if !envOK.MatchString(kv) {
			return false
		}
	}
	return true
}

func FuzzParseRequest(f *testing.F) {
	key := strings.Repeat("ab", 32)
	for _, r := range []Request{
		{Op: "exec", Session: "hd", Key: key, Command: "go test ./...", Dir: "/src/x", Env: []string{"HOME=/root", "A=b=c", "E="}},
		{Op: "status", Session: "s.1", Key: key},
		{Op: "stop", Session: "s-1", Key: strings.Repeat("0", 64)},
		{Op: "exec", Session: "hd", Key: key, Command: "true", Dir: "/a/../b"},
		{Op: "exec", Session: "hd", Key: key, Command: "true", Dir: "/", Env: []string{"=x"}},
		{Op: "status", Session: "hd", Key: key, Command: "x"},
		{Op: "run", Session: "hd", Key: key},
		{Op: "exec", Session: "../x", Key: key, Command: "true", Dir: "/"},
	} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte(`{"op":"status","session":"hd","key":"` + key + `","extra":1}`))
	f.Add([]byte(`{"op":"status","session":"hd","key":"` + key + `"} {}`))
	f.Add([]byte(`{"op":"exec","session":"hd","key":"` + key + `","command":"a\u0000b","dir":"/"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			if !reflect.DeepEqual(r, Request{}) {
				t.Fatalf("a refused request returned %+v", r)
			}
			// Refused: the oracle agrees whenever the bytes are one
			// well-formed JSON object of known fields.
			var loose Request
			if json.Unmarshal(b, &loose) == nil && acceptable(loose) && len(b) <= MaxRequest && strictJSON(b) {
				t.Fatalf("refused %q (%v), which the oracle accepts", b, err)
			}
			return
		}
		if !acceptable(r) {
			t.Fatalf("accepted %+v, which the oracle refuses", r)
		}
		// What is accepted survives its own encoding.
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ParseRequest(again)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoded %+v: %+v, %v", r, r2, err)
		}
	})
}

// strictJSON reports whether b is one JSON object of Request's fields only,
// with nothing after it: what ParseRequest insists on besides the values.
func strictJSON(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	known := map[string]bool{"op": true, "session": true, "key": true, "command": true, "dir": true, "env": true}
	for k := range m {
		if !known[k] {
			return false
		}
	}
	// json.Unmarshal of a map refuses trailing data already; duplicate or
	// case-folded keys are where the two decoders may differ.
	for k := range m {
		if strings.ToLower(k) != k {
			return false
		}
	}
	return !strings.Contains(string(b), `"op"`) || strings.Count(string(b), `"op"`) == 1
}
