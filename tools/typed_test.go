package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pairOf is two servers with one tool whose handler returns out and
// records the arguments it was given: one added by the SDK's own
// mcp.AddTool (the oracle), one by addTyped. call sends the same arguments
// to both.
type pairOf[In, Out any] struct {
	sdk, ours *mcp.ClientSession
	got       [2][]In
}

func newPair[In, Out any](t testing.TB, out func(In) (Out, error)) *pairOf[In, Out] {
	t.Helper()
	p := &pairOf[In, Out]{}
	connect := func(i int) *mcp.ClientSession {
		s := mcp.NewServer(&mcp.Implementation{Name: "oracle"}, nil)
		tool := &mcp.Tool{Name: "t", Description: "a tool"}
		h := func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
			p.got[i] = append(p.got[i], in)
			o, err := out(in)
			return nil, o, err
		}
		if i == 0 {
			mcp.AddTool(s, tool, h)
		} else if err := addTyped(s, tool, h); err != nil {
			t.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	p.sdk, p.ours = connect(0), connect(1)
	return p
}

// call sends args to both servers and fails t where their results differ:
// the error flag, the texts, the structured content, the arguments the
// handler was given.
func (p *pairOf[In, Out]) call(t testing.TB, args json.RawMessage) (isError bool, text string) {
	t.Helper()
	p.got = [2][]In{}
	var res [2]*mcp.CallToolResult
	var errs [2]error
	for i, cs := range []*mcp.ClientSession{p.sdk, p.ours} {
		var a any
		if args != nil {
			a = args
		}
		res[i], errs[i] = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "t", Arguments: a})
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		t.Fatalf("arguments %s: the SDK's call error %v, ours %v", args, errs[0], errs[1])
	}
	if errs[0] != nil {
		return true, errs[0].Error()
	}
	if res[0].IsError != res[1].IsError {
		t.Fatalf("arguments %s: the SDK's isError %v (%s), ours %v (%s)", args, res[0].IsError, texts(res[0]), res[1].IsError, texts(res[1]))
	}
	if a, b := texts(res[0]), texts(res[1]); a != b && !(res[0].IsError && sameLetters(a, b)) {
		t.Fatalf("arguments %s: the SDK's text %q, ours %q", args, a, b)
	}
	if !sameJSON(res[0].StructuredContent, res[1].StructuredContent) {
		t.Fatalf("arguments %s: the SDK's structured content %s, ours %s", args, jsonString(res[0].StructuredContent), jsonString(res[1].StructuredContent))
	}
	if !reflect.DeepEqual(p.got[0], p.got[1]) {
		t.Fatalf("arguments %s: the SDK's handler got %#v, ours %#v", args, p.got[0], p.got[1])
	}
	return res[1].IsError, texts(res[1])
}

// sameLetters says whether a and b are made of the same characters: the
// schema validator names unexpected properties in a map's order, which
// differs from one call to the next.
func sameLetters(a, b string) bool {
	x, y := []rune(a), []rune(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func texts(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// sameJSON compares two values by their JSON (key order aside).
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		raw, _ := json.Marshal(v)
		var x any
		json.Unmarshal(raw, &x)
		return x
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// TestTypedToolsAsTheSDKs: addTyped accepts and refuses the arguments the
// SDK's mcp.AddTool does, with the same words, passes the handler the same
// values, and gives the client the same result and structured content,
// the SDK's output validation included (an output its schema refuses would
// be an error there and not here).
func TestTypedToolsAsTheSDKs(t *testing.T) {
	code := 3
	bash := newPair(t, func(in BashInput) (*BashOutput, error) {
		switch in.Command {
		case "fail":
			return nil, jsonrpcErr
		case "err":
			return nil, errBoom
		case "nil":
			return nil, nil
		}
		return &BashOutput{ExitCode: &code, DurationMs: 12, Cwd: "/w", Truncated: in.RunInBackground}, nil
	})
	for _, row := range []struct {
		name, args string
		refused    bool
	}{
		{"no arguments", "", true},
		{"empty object (command is required)", `{}`, true},
		{"a command", `{"command":"true"}`, false},
		{"every field", `{"command":"ls","timeout":5000,"description":"d","run_in_background":true}`, false},
		{"a handler's error", `{"command":"err"}`, true},
		{"a typed nil output", `{"command":"nil"}`, false},
		{"unknown property", `{"command":"true","cmd":"x"}`, true},
		{"a field in another case", `{"Command":"rm -rf /"}`, true},
		{"a field in another case beside the right one", `{"command":"true","COMMAND":"rm -rf /"}`, true},
		{"wrong type", `{"command":7}`, true},
		{"null for a string", `{"command":null}`, true},
		{"a float for an int", `{"command":"x","timeout":1.5}`, true},
		{"an integral float", `{"command":"x","timeout":2.0}`, false},
		{"a huge int", `{"command":"x","timeout":1e400}`, true},
		{"a string for a bool", `{"command":"x","run_in_background":"true"}`, true},
		{"duplicate keys, last wins", `{"command":"a","command":"b"}`, false},
		{"duplicate keys, first of the wrong type", `{"timeout":"x","timeout":5,"command":"a"}`, false},
		{"an array", `[1,2]`, true},
		{"a string", `"command"`, true},
		{"null", `null`, true},
		{"escapes", `{"command":"\u0074rue \ud83d\ude00 \"q\" \\"}`, false},
		{"invalid surrogate", `{"command":"\udc00"}`, false},
		{"deep nesting in an unknown field", `{"command":"x","deep":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`, true},
		{"nesting within the bound in an unknown field", `{"command":"x","deep":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`, true},
	} {
		t.Run(row.name, func(t *testing.T) {
			var args json.RawMessage
			if row.args != "" {
				args = json.RawMessage(row.args)
			}
			refused, text := bash.call(t, args)
			if refused != row.refused {
				t.Errorf("refused %v (%s), want %v", refused, text, row.refused)
			}
		})
	}
	t.Run("a protocol error", func(t *testing.T) {
		bash.call(t, json.RawMessage(`{"command":"fail"}`))
	})

	// A tool without an output schema, and one whose output has a list.
	release := newPair(t, func(ReleaseInput) (any, error) { return nil, nil })
	for _, args := range []string{`{}`, `{"x":1}`, ``} {
		var a json.RawMessage
		if args != "" {
			a = json.RawMessage(args)
		}
		release.call(t, a)
	}
	port := newPair(t, func(in PortInput) (PortOutput, error) {
		switch in.SandboxPort {
		case 1:
			return PortOutput{Forwards: []PortForward{}}, nil
		case 2:
			return PortOutput{Forwards: []PortForward{{URL: "http://127.0.0.1:1", HostAddr: "127.0.0.1:1", SandboxPort: 80}}}, nil
		}
		return PortOutput{}, nil
	})
	for _, args := range []string{`{}`, `{"sandbox_port":1}`, `{"sandbox_port":2,"stop":false}`, `{"sandbox_port":"2"}`} {
		port.call(t, json.RawMessage(args))
	}
}

var (
	jsonrpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused by the handler"}
	errBoom    = &boomError{}
)

type boomError struct{}

func (*boomError) Error() string { return "boom: the handler failed" }

// FuzzTypedArguments: for any JSON arguments, the bash tool added by
// addTyped answers as the SDK's mcp.AddTool does (the oracle): refused or
// not, with the same words, the handler given the same BashInput.
func FuzzTypedArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"command":"true"}`, `{"command":"x","timeout":5,"run_in_background":true}`, `{"Command":"x"}`, `{"command":1}`, `{"a":[[[{}]]]}`, `{"command":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	pair := newPair(f, func(in BashInput) (*BashOutput, error) { return &BashOutput{Cwd: in.Command}, nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // the transport answers invalid JSON before any tool sees it
		}
		pair.call(t, json.RawMessage(data))
	})
}

// FuzzDecodeMessage: decodeMessage gives what jsonrpc.DecodeMessage (the
// oracle) gives for any line: both fail, or both return the same message.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","method":""}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}`,
		`{"jsonrpc":"1.0","id":1,"method":"x"}`,
		`{"JSONRPC":"2.0","id":1,"Method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"x","params":[1]}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","method":"y"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if !json.Valid(line) || len(line) == 0 || line[0] == '[' {
			return // the transport refuses these before decoding (stdioConn.decode)
		}
		want, werr := jsonrpc.DecodeMessage(line)
		got, gerr := decodeMessage(line)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: the SDK's error %v, ours %v", line, werr, gerr)
		}
		if werr != nil {
			if werr.Error() != gerr.Error() {
				t.Fatalf("%s: the SDK's error %q, ours %q", line, werr, gerr)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the SDK's message %#v, ours %#v", line, want, got)
		}
	})
}

// TestDecodeDepthBound: a value nested deeper than MaxJSONDepth is refused
// before it is parsed, one at the bound is decoded.
func TestDecodeDepthBound(t *testing.T) {
	var v any
	if err := decode([]byte(strings.Repeat("[", MaxJSONDepth+1)+strings.Repeat("]", MaxJSONDepth+1)), &v); err == nil || !strings.Contains(err.Error(), "nesting depth") {
		t.Errorf("nesting of %d: %v, want the depth refused", MaxJSONDepth+1, err)
	}
	if err := decode([]byte(strings.Repeat("[", MaxJSONDepth)+strings.Repeat("]", MaxJSONDepth)), &v); err != nil {
		t.Errorf("nesting of %d: %v", MaxJSONDepth, err)
	}
	// Brackets in strings do not count.
	if err := decode([]byte(`["`+strings.Repeat("[", 2*MaxJSONDepth)+`\"["]`), &v); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
}

// TestQuickCheckCovers: every tool's input schema is of the flat form the
// quick check takes (else each call pays the validator), a typical call's
// arguments pass it, and a schema with any other keyword has none.
func TestQuickCheckCovers(t *testing.T) {
	for _, tool := range listTools(t) {
		raw, _ := json.Marshal(tool.InputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if quickCheckFor(&s) == nil {
			t.Errorf("%s: no quick check for its input schema %s", tool.Name, raw)
		}
	}
	bash, _ := jsonschema.ForType(reflect.TypeFor[BashInput](), &jsonschema.ForOptions{})
	q := quickCheckFor(bash)
	for _, ok := range []map[string]any{{"command": "true"}, {"command": "x", "timeout": 5000.0, "description": "d", "run_in_background": false}} {
		if !q.valid(ok) {
			t.Errorf("%v: not vouched for", ok)
		}
	}
	for _, bad := range []map[string]any{{}, {"command": 1.0}, {"command": "x", "timeout": 1.5}, {"command": "x", "Timeout": 1.0}, {"command": nil}, {"command": "x", "run_in_background": "true"}} {
		if q.valid(bad) {
			t.Errorf("%v: vouched for", bad)
		}
	}
	for _, row := range []struct{ name, schema string }{
		{"a default", `{"type":"object","properties":{"a":{"type":"string","default":"x"}},"additionalProperties":false}`},
		{"an enum", `{"type":"object","properties":{"a":{"type":"string","enum":["x"]}},"additionalProperties":false}`},
		{"a minimum", `{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"additionalProperties":false}`},
		{"a type list", `{"type":"object","properties":{"a":{"type":["null","string"]}},"additionalProperties":false}`},
		{"a number", `{"type":"object","properties":{"a":{"type":"number"}},"additionalProperties":false}`},
		{"a nested object", `{"type":"object","properties":{"a":{"type":"object"}},"additionalProperties":false}`},
		{"a property without a type", `{"type":"object","properties":{"a":{"description":"d"}},"additionalProperties":false}`},
		{"additional properties allowed", `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"additional properties typed", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`},
		{"a required name that is no property", `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"],"additionalProperties":false}`},
		{"pattern properties", `{"type":"object","patternProperties":{"x":{}},"additionalProperties":false}`},
		{"not an object", `{"type":"string"}`},
		{"no type", `{"properties":{"a":{"type":"string"}},"additionalProperties":false}`},
	} {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(row.schema), &s); err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if quickCheckFor(&s) != nil {
			t.Errorf("%s: %s has a quick check", row.name, row.schema)
		}
	}
}

// FuzzQuickCheckImpliesValid: whatever arguments the quick check vouches
// for, the schema validator (the oracle) accepts, for every tool's input
// schema.
func FuzzQuickCheckImpliesValid(f *testing.F) {
	for _, s := range []string{`{"command":"true"}`, `{"command":"x","timeout":1e3}`, `{"command":"x","timeout":-0}`, `{"file_path":"/a","limit":2}`, `{"id":"x","block":true}`, `{"sandbox_port":65536}`, `{"input":""}`, `{}`} {
		f.Add([]byte(s))
	}
	type check struct {
		q *quickCheck
		r *jsonschema.Resolved
	}
	var checks []check
	for _, s := range []func() (*jsonschema.Schema, *jsonschema.Resolved, any, error){
		schemaFor[BashInput], schemaFor[OutputInput], schemaFor[JobInput], schemaFor[ReadInput], schemaFor[WriteInput],
		schemaFor[EditInput], schemaFor[ApplyPatchInput], schemaFor[PortInput], schemaFor[ReleaseInput],
	} {
		sch, r, _, err := s()
		if err != nil {
			f.Fatal(err)
		}
		checks = append(checks, check{quickCheckFor(sch), r})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v map[string]any
		if decode(data, &v) != nil || v == nil {
			return
		}
		for _, c := range checks {
			if c.q.valid(v) {
				var u any = v
				if err := c.r.Validate(&u); err != nil {
					t.Fatalf("%s vouched for, but the validator refuses it: %v", data, err)
				}
			}
		}
	})
}
