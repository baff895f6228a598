package clientsetup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// node is one JSON value that keeps its object keys in file order, so a
// settings file sbx edits keeps the user's order. Scalars keep their text.
type node struct {
	keys  []string // object keys, in order
	vals  []*node  // object values, parallel to keys
	elems []*node  // array elements
	raw   []byte   // a scalar's compact JSON text
	kind  byte     // 'o' object, 'a' array, 's' scalar
}

// errDuplicateKey: a key given twice in one object. encoding/json keeps the
// last; a client may keep the first. sbx refuses to guess which one counts.
var errDuplicateKey = errors.New("duplicate key")

// parseJSON reads one JSON document (an empty or all-blank input is an
// empty object: a settings file that exists but holds nothing).
func parseJSON(data []byte) (*node, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return &node{kind: 'o'}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	return n, nil
}

func parseNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				if n.index(k) >= 0 {
					return nil, fmt.Errorf("%w %q", errDuplicateKey, k)
				}
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '[':
			n := &node{kind: 'a', elems: []*node{}}
			for dec.More() {
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		raw, err := marshalNoEscape(tok)
		if err != nil {
			return nil, err
		}
		return &node{kind: 's', raw: raw}, nil
	}
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func (n *node) index(key string) int {
	for i, k := range n.keys {
		if k == key {
			return i
		}
	}
	return -1
}

func (n *node) get(key string) *node {
	if i := n.index(key); i >= 0 {
		return n.vals[i]
	}
	return nil
}

func (n *node) set(key string, v *node) {
	if i := n.index(key); i >= 0 {
		n.vals[i] = v
		return
	}
	n.keys, n.vals = append(n.keys, key), append(n.vals, v)
}

// str is a scalar node holding s.
func str(s string) *node {
	raw, _ := marshalNoEscape(s)
	return &node{kind: 's', raw: raw}
}

// text is the string a scalar node holds, and whether it is one.
func (n *node) text() (string, bool) {
	if n == nil || n.kind != 's' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(n.raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// object returns the object under key, adding an empty one when the key is
// missing; a key holding something else is an error naming where.
func (n *node) object(key, where string) (*node, error) {
	v := n.get(key)
	if v == nil {
		v = &node{kind: 'o'}
		n.set(key, v)
	}
	if v.kind != 'o' {
		return nil, fmt.Errorf("%s.%s is not a JSON object", where, key)
	}
	return v, nil
}

// addStrings appends to the string array under key each of want that it
// does not hold yet, and returns those it added.
func (n *node) addStrings(key, where string, want ...string) ([]string, error) {
	v := n.get(key)
	if v == nil {
		v = &node{kind: 'a', elems: []*node{}}
		n.set(key, v)
	}
	if v.kind != 'a' {
		return nil, fmt.Errorf("%s.%s is not a JSON array", where, key)
	}
	have := map[string]bool{}
	for _, e := range v.elems {
		if s, ok := e.text(); ok {
			have[s] = true
		}
	}
	var added []string
	for _, w := range want {
		if !have[w] {
			v.elems = append(v.elems, str(w))
			have[w] = true
			added = append(added, w)
		}
	}
	return added, nil
}

// encode writes n as JSON.stringify(n, null, 2) does, which is how Claude
// Code, Cursor and Windsurf write their own files.
func (n *node) encode() []byte {
	var b bytes.Buffer
	n.write(&b, 0)
	b.WriteByte('\n')
	return b.Bytes()
}

func (n *node) write(b *bytes.Buffer, depth int) {
	indent := func(d int) { b.WriteString("\n" + strings.Repeat("  ", d)) }
	switch n.kind {
	case 's':
		b.Write(n.raw)
	case 'a':
		if len(n.elems) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			indent(depth + 1)
			e.write(b, depth+1)
		}
		indent(depth)
		b.WriteByte(']')
	case 'o':
		if len(n.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			indent(depth + 1)
			kb, _ := marshalNoEscape(k)
			b.Write(kb)
			b.WriteString(": ")
			n.vals[i].write(b, depth+1)
		}
		indent(depth)
		b.WriteByte('}')
	}
}

// plain converts n to what encoding/json.Unmarshal gives for the same text.
func (n *node) plain() any {
	switch n.kind {
	case 'o':
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = n.vals[i].plain()
		}
		return m
	case 'a':
		l := make([]any, len(n.elems))
		for i, e := range n.elems {
			l[i] = e.plain()
		}
		return l
	}
	var v any
	_ = json.Unmarshal(n.raw, &v)
	return v
}
