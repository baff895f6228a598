package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTyped adds a tool with a typed handler, as mcp.AddTool does, and with
// the same schemas (derived from In and Out as the SDK derives them, resolved
// once here) and the same input checks, but with less work per call. The
// SDK's per-call path decodes through a streaming decoder that allocates a
// 32 KiB buffer for every value (three per call: the arguments into a map
// for the schema, then into In, the output back into a value for its
// schema), and validates the handler's own output against its own schema.
// Here the arguments are validated exactly as the SDK does (decoded into a
// map, defaults applied, validated, re-encoded, decoded into In: decode is
// the SDK's decoder without its buffer), and the output is encoded once:
// it is a value of Out, whose schema is derived from Out, so it cannot fail
// that schema (TestOutputsMatchTheirSchemas holds this for every tool).
func addTyped[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) error {
	tt, th, err := typedTool(t, h)
	if err != nil {
		return err
	}
	s.AddTool(tt, th)
	return nil
}

// typedTool returns the tool with its schemas set and its handler.
func typedTool[In, Out any](t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) (*mcp.Tool, mcp.ToolHandler, error) {
	if t.InputSchema != nil || t.OutputSchema != nil {
		return nil, nil, fmt.Errorf("tool %s: its schemas are derived from its handler's types, not given", t.Name)
	}
	tt := *t
	inSchema, inResolved, _, err := schemaFor[In]()
	if err != nil {
		return nil, nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	tt.InputSchema = inSchema
	quick := quickCheckFor(inSchema)
	var elemZero any
	hasOut := reflect.TypeFor[Out]() != reflect.TypeFor[any]()
	if hasOut {
		var outSchema *jsonschema.Schema
		if outSchema, _, elemZero, err = schemaFor[Out](); err != nil {
			return nil, nil, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
		}
		tt.OutputSchema = outSchema
	}
	th := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		input, err := checkArguments(req.Params.Arguments, inResolved, quick)
		if err != nil {
			var errRes mcp.CallToolResult
			errRes.SetError(fmt.Errorf("validating \"arguments\": %v", err))
			return &errRes, nil
		}
		var in In
		if input != nil {
			if err := decode(input, &in); err != nil {
				var errRes mcp.CallToolResult
				errRes.SetError(err)
				return &errRes, nil
			}
		}
		res, out, err := h(ctx, req, in)
		if err != nil {
			// A *jsonrpc.Error is a protocol error; any other becomes a
			// result with IsError, which the model reads.
			if wireErr, ok := err.(*jsonrpc.Error); ok {
				return nil, wireErr
			}
			var errRes mcp.CallToolResult
			errRes.SetError(err)
			return &errRes, nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		if !hasOut || res.InputRequests != nil {
			return res, nil // no output schema (or input requests): no structured content
		}
		var outval any = out
		if elemZero != nil {
			var z Out
			if any(out) == any(z) { // a typed nil: its element's zero value, not null
				outval = elemZero
			}
		}
		outJSON, err := json.Marshal(outval)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		res.StructuredContent = json.RawMessage(outJSON)
		// The JSON as text too where there is no content, or where it is not
		// an object (for clients before structured content), as the SDK does.
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: sortedJSON(outJSON)}}
		} else if len(outJSON) == 0 || outJSON[0] != '{' {
			res.Content = append(res.Content, &mcp.TextContent{Text: string(outJSON)})
		}
		return res, nil
	}
	return &tt, th, nil
}

// sortedJSON is data with its objects' keys sorted: the text the SDK
// gives beside structured content (it re-encodes a decoded value).
func sortedJSON(data []byte) string {
	var v any
	if decode(data, &v) != nil {
		return string(data)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(data)
	}
	return string(out)
}

// schemaFor derives T's schema as the SDK does for a tool's In or Out (a
// pointer type by its element, whose zero value is returned for a typed
// nil), and resolves it once.
func schemaFor[T any]() (*jsonschema.Schema, *jsonschema.Resolved, any, error) {
	rt := reflect.TypeFor[T]()
	var zero any
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
		zero = reflect.Zero(rt).Interface()
	}
	s, err := jsonschema.ForType(rt, &jsonschema.ForOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	if s == nil {
		return nil, nil, nil, fmt.Errorf("schema is nil for type %v", rt)
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, nil, nil, err
	}
	return s, r, zero, nil
}

// checkArguments validates a call's arguments against the input schema as
// the SDK does: decoded into a map (so that no arguments are {}), defaults
// applied, validated, and re-encoded for the decode into In. Arguments that
// quick vouches for skip the validator (and its defaults, which a schema
// quick accepts has none); any other goes through it, so that every refusal
// and its words are the validator's.
func checkArguments(data json.RawMessage, resolved *jsonschema.Resolved, quick *quickCheck) (json.RawMessage, error) {
	v := make(map[string]any)
	if len(data) > 0 {
		if err := decode(data, &v); err != nil {
			return nil, fmt.Errorf("unmarshaling arguments: %w", err)
		}
	}
	var u any = v
	if !quick.valid(v) {
		if err := resolved.ApplyDefaults(&u); err != nil {
			return nil, fmt.Errorf("applying schema defaults:\n%w", err)
		}
		if err := resolved.Validate(&u); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("marshalling with defaults: %v", err)
	}
	return out, nil
}

// quickCheck vouches for arguments that a flat object schema accepts: an
// object of known properties, each a string, a boolean or an integer, the
// required ones present. The schema validator (jsonschema-go) walks its
// whole schema by reflection, and its large frames grow the stack of the
// SDK's goroutine per call: it was a sixth of sbx-mcp's CPU for a warm bash
// call. quickCheck is only ever a shortcut to "valid": it says so only for
// a schema of that flat form alone (every other keyword, a default, a type
// list, makes it nil: the validator for all) and only for a value it can
// prove valid; anything else goes to the validator
// (FuzzQuickCheckImpliesValid holds that).
type quickCheck struct {
	props    map[string]string // name -> "string", "boolean" or "integer"
	required []string
}

// quickCheckFor returns the quick check for schema s, or nil when s is
// not of the flat form: {"type":"object", "properties":{name:{"type":
// string|boolean|integer, "description":...}}, "required":[...],
// "additionalProperties":false}, with no other keyword anywhere.
func quickCheckFor(s *jsonschema.Schema) *quickCheck {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	q := &quickCheck{props: map[string]string{}}
	for k, v := range top {
		switch k {
		case "type":
			var t string
			if json.Unmarshal(v, &t) != nil || t != "object" {
				return nil
			}
		case "additionalProperties":
			if string(v) != "false" {
				return nil
			}
		case "required":
			if json.Unmarshal(v, &q.required) != nil {
				return nil
			}
		case "properties":
			var props map[string]map[string]json.RawMessage
			if json.Unmarshal(v, &props) != nil {
				return nil
			}
			for name, p := range props {
				for pk, pv := range p {
					switch pk {
					case "description":
					case "type":
						var t string
						if json.Unmarshal(pv, &t) != nil || (t != "string" && t != "boolean" && t != "integer") {
							return nil
						}
						q.props[name] = t
					default:
						return nil
					}
				}
				if q.props[name] == "" {
					return nil
				}
			}
		default:
			return nil
		}
	}
	if top["type"] == nil || string(top["additionalProperties"]) != "false" {
		return nil
	}
	for _, r := range q.required {
		if q.props[r] == "" {
			return nil
		}
	}
	return q
}

// valid says whether v is certainly valid; false means "ask the validator".
func (q *quickCheck) valid(v map[string]any) bool {
	if q == nil {
		return false
	}
	for k, x := range v {
		switch q.props[k] {
		case "string":
			if _, ok := x.(string); !ok {
				return false
			}
		case "boolean":
			if _, ok := x.(bool); !ok {
				return false
			}
		case "integer":
			f, ok := x.(float64)
			if !ok || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
				return false
			}
		default:
			return false // unknown: additionalProperties is false
		}
	}
	for _, r := range q.required {
		if _, ok := v[r]; !ok {
			return false
		}
	}
	return true
}
