package tools

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/sbx-sh/sbx/internal/fastjson"
)

// MaxJSONDepth bounds the nesting of a JSON value sbx-mcp decodes, as the
// SDK bounds its own: deeper input is refused before it is parsed.
const MaxJSONDepth = fastjson.MaxDepth

// decode is the SDK's JSON decoding (segmentio/encoding/json, struct fields
// matched by their exact names, nesting bounded by MaxJSONDepth:
// internal/fastjson) of one value, without the 32 KiB buffer its streaming
// decoder allocates per value. What follows the value is ignored, as the
// SDK's decoder ignores it; every caller passes one value (a line
// json.Valid accepted, or a part of one).
func decode(data []byte, v any) error { return fastjson.Decode(data, v) }

// wireMessage is a JSON-RPC message as the SDK decodes one (its Method raw,
// to tell a present "method" from an absent one).
type wireMessage struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// decodeMessage is jsonrpc.DecodeMessage for the messages a client sends
// most (requests and notifications), decoded as the SDK decodes them but
// with decode's one pass instead of two buffered ones. Anything else (a
// response, or a message this path refuses) goes to jsonrpc.DecodeMessage
// itself, so that what is refused, and the error saying why, are the SDK's
// (FuzzDecodeMessage holds the two equal).
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	var m wireMessage
	if decode(line, &m) == nil && m.VersionTag == "2.0" && len(m.Method) > 0 {
		var method string
		if decode(m.Method, &method) == nil {
			if id, err := jsonrpc.MakeID(m.ID); err == nil {
				return &jsonrpc.Request{ID: id, Method: method, Params: m.Params}, nil
			}
		}
	}
	return jsonrpc.DecodeMessage(line)
}
