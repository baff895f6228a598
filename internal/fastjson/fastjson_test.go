package fastjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// frame is shaped as the local wire's frames are: strings, lists, raw JSON,
// bytes (base64), numbers and flags.
type frame struct {
	Op    string          `json:"op"`
	Argv  []string        `json:"argv,omitempty"`
	Sync  json.RawMessage `json:"sync,omitempty"`
	Push  []byte          `json:"push,omitempty"`
	N     int64           `json:"n,omitempty"`
	Seq   uint64          `json:"seq,omitempty"`
	Flag  bool            `json:"flag,omitempty"`
	Inner *frame          `json:"inner,omitempty"`
}

func TestRoundTripMatchesEncodingJSON(t *testing.T) {
	in := frame{Op: "exec", Argv: []string{"/bin/bash", "-c", "echo \"é\" \\ \x01"}, Sync: json.RawMessage(`{"a":[1,{"b":null}]}`),
		Push: []byte{0, 1, 2, 255}, N: -7, Seq: 1<<64 - 1, Flag: true, Inner: &frame{Op: "x"}}
	raw, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var std, fast frame
	if err := json.Unmarshal(raw, &std); err != nil {
		t.Fatalf("encoding/json cannot read Marshal's %s: %v", raw, err)
	}
	if err := Unmarshal(raw, &fast); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(std, fast) || !reflect.DeepEqual(fast, in) {
		t.Errorf("round trip:\n in   %+v\n std  %+v\n fast %+v", in, std, fast)
	}
}

func TestRefused(t *testing.T) {
	var f frame
	for _, in := range []string{
		`{"op":"x"} {"op":"y"}`, // a second value
		`{"op":"x"}x`,
		`{"op":`,
		`{"op":"x",}`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		if err := Unmarshal([]byte(in), &f); err == nil {
			t.Errorf("%.40q: accepted", in)
		}
	}
	if err := Unmarshal([]byte(" {\"op\":\"x\"} \n\t"), &f); err != nil || f.Op != "x" {
		t.Errorf("white space around the value: %v, %+v", err, f)
	}
	// Field names match exactly, never by case.
	f = frame{}
	if err := Unmarshal([]byte(`{"OP":"x"}`), &f); err != nil || f.Op != "" {
		t.Errorf(`{"OP":"x"}: %v, Op %q; want it ignored`, err, f.Op)
	}
	if err := Decode([]byte(`{"op":"x"} trailing`), &f); err != nil || f.Op != "x" {
		t.Errorf("Decode with something after the value: %v, %+v", err, f)
	}
}

// FuzzUnmarshal: against encoding/json as the oracle, on input that is
// valid UTF-8 and names fields exactly: the same input is accepted or
// refused by both, and what is accepted decodes to the same value.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"op":"exec","argv":["a","b"],"sync":{"x":[1,2]},"push":"AAEC","n":-1,"seq":18446744073709551615,"flag":true}`,
		`{"inner":{"inner":{"op":"deep"}}}`, `{"push":"not base64"}`, `{"n":1.5}`, `{"seq":-1}`, `[]`, `null`, `{"op":"\u00e9\ud83d\ude00"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) || strings.Contains(strings.ToLower(in), `"op"`) && !strings.Contains(in, `"op"`) {
			return // encoding/json's repair of bad UTF-8 and its case-blind names differ on purpose
		}
		var keys map[string]any
		if json.Unmarshal([]byte(in), &keys) == nil && !exactNames(keys) {
			return
		}
		var std, fast frame
		serr := json.Unmarshal([]byte(in), &std)
		ferr := Unmarshal([]byte(in), &fast)
		if (serr == nil) != (ferr == nil) {
			if serr != nil && TooDeep([]byte(in), MaxDepth) {
				return
			}
			t.Fatalf("%q: encoding/json says %v, fastjson %v", in, serr, ferr)
		}
		if serr == nil && !reflect.DeepEqual(std, fast) {
			t.Fatalf("%q:\n std  %+v\n fast %+v", in, std, fast)
		}
	})
}

// exactNames reports whether every key of m (and of the objects under
// inner) is one of frame's names as written, or no field's at all.
func exactNames(m map[string]any) bool {
	names := []string{"op", "argv", "sync", "push", "n", "seq", "flag", "inner"}
	for k, v := range m {
		for _, n := range names {
			if strings.EqualFold(k, n) && k != n {
				return false
			}
		}
		if k == "inner" {
			if sub, ok := v.(map[string]any); ok && !exactNames(sub) {
				return false
			}
		}
	}
	return true
}
