// Package fastjson is the JSON of sbx's per-command paths: the MCP SDK's own
// codec (github.com/segmentio/encoding/json, already linked for the SDK),
// about five times encoding/json's decoding speed on sbx's messages, with
// struct fields matched by their exact names only and nesting bounded by
// MaxDepth before anything is parsed (the codec recurses, and its input may
// come from a sandbox). The local backend's wire frames, the sync's request
// and reply, and sbx-mcp's tool arguments go through it; both ends of each
// are sbx's own, and any of them may be a sandbox's forgery, which is why
// the bound and the whole-input rule hold here, not at each caller.
package fastjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	segjson "github.com/segmentio/encoding/json"
)

// MaxDepth bounds the nesting of a value decoded here, as the MCP SDK
// bounds its own: deeper input is refused before it is parsed.
const MaxDepth = 1000

// Unmarshal decodes data, one JSON value and nothing after it but white
// space, into v, as encoding/json.Unmarshal does (but for field names,
// matched exactly).
func Unmarshal(data []byte, v any) error {
	rest, err := parse(data, v)
	if err == nil && len(rest) > 0 {
		return fmt.Errorf("json: invalid character %q after top-level value", rest[0])
	}
	return err
}

// Decode decodes the first JSON value of data into v and ignores what
// follows it, as the SDK's stream decoder does with one line.
func Decode(data []byte, v any) error {
	_, err := parse(data, v)
	return err
}

func parse(data []byte, v any) ([]byte, error) {
	deep, long := scan(data, MaxDepth)
	if deep {
		return nil, fmt.Errorf("json: exceeded maximum nesting depth of %d", MaxDepth)
	}
	if long {
		// segmentio's integer parsing can wrap past 2^64 unnoticed
		// (its overflow check compares the product, not the
		// multiplication): an integer that long takes encoding/json's
		// own, exact path (which matches names by case too).
		d := json.NewDecoder(bytes.NewReader(data))
		if err := d.Decode(v); err != nil {
			// Refused, as segmentio's refuses it where it does: then in its
			// words, which are the MCP SDK's (tools' FuzzTypedArguments);
			// where segmentio's would take it (a wrapped integer), refused
			// all the same.
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
				if _, serr := segjson.Parse(data, reflect.New(rv.Type().Elem()).Interface(), segjson.DontMatchCaseInsensitiveStructFields); serr != nil {
					return nil, serr
				}
			}
			return nil, err
		}
		return data[d.InputOffset():], nil
	}
	rest, err := segjson.Parse(data, v, segjson.DontMatchCaseInsensitiveStructFields)
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r') {
		rest = rest[1:]
	}
	return rest, err
}

// Marshal encodes v as encoding/json.Marshal does.
func Marshal(v any) ([]byte, error) { return segjson.Marshal(v) }

// TooDeep says whether data nests objects and arrays deeper than max,
// outside strings.
func TooDeep(data []byte, max int) bool {
	deep, _ := scan(data, max)
	return deep
}

// longDigits is the shortest run of digits outside strings that parse
// leaves to encoding/json: 2^63 has 19.
const longDigits = 19

// scan says whether data nests deeper than max, and whether it holds a run
// of longDigits digits or more outside strings.
func scan(data []byte, max int) (deep, long bool) {
	depth, digits := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		if !inString && c >= '0' && c <= '9' {
			if digits++; digits >= longDigits {
				long = true
			}
			continue
		}
		digits = 0
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > max {
				return true, long
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false, long
}
