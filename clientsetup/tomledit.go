package clientsetup

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// tomlSetting is one key sbx needs in a TOML file: table "" is the top level,
// value is TOML text (`"read-only"`, `false`) and want what it decodes to.
type tomlSetting struct {
	table, key, value string
	want              any
}

// tomlStatement is one logical line of a TOML file: a table header or a
// key = value that may span lines (a multi-line string or array).
type tomlStatement struct {
	first, last int    // line indexes
	header      string // table name, for a header
	key         string // bare key, for a key/value
}

// scanTOML splits lines into statements. It only needs to tell headers and
// keys apart from text inside strings and arrays; editTOML checks the result
// with a real TOML decoder, so a case this scanner gets wrong fails closed.
func scanTOML(lines []string) []tomlStatement {
	var out []tomlStatement
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasPrefix(t, "[") {
			name := strings.TrimSpace(strings.Trim(stripComment(t), "[]"))
			out = append(out, tomlStatement{first: i, last: i, header: normalizeKey(name)})
			continue
		}
		eq := strings.IndexByte(t, '=')
		if eq < 0 {
			continue
		}
		st := tomlStatement{first: i, key: normalizeKey(strings.TrimSpace(t[:eq]))}
		// Follow the value to its end: open brackets and multi-line strings.
		depth, inStr, j := 0, "", i
		rest := t[eq+1:]
		for {
			for k := 0; k < len(rest); k++ {
				c := rest[k]
				switch {
				case inStr != "":
					if strings.HasPrefix(rest[k:], inStr) && (len(inStr) == 3 || !escaped(rest, k, inStr)) {
						k += len(inStr) - 1
						inStr = ""
					} else if len(inStr) == 1 && inStr == `"` && c == '\\' {
						k++
					}
				case strings.HasPrefix(rest[k:], `"""`) || strings.HasPrefix(rest[k:], `'''`):
					inStr = rest[k : k+3]
					k += 2
				case c == '"' || c == '\'':
					inStr = string(c)
				case c == '#':
					k = len(rest)
				case c == '[' || c == '{':
					depth++
				case c == ']' || c == '}':
					depth--
				}
			}
			if len(inStr) == 1 {
				inStr = "" // a one-line string cannot continue on the next line
			}
			if (depth <= 0 && inStr == "") || j+1 >= len(lines) {
				break
			}
			j++
			rest = lines[j]
		}
		st.last = j
		out = append(out, st)
		i = j
	}
	return out
}

func escaped(s string, k int, quote string) bool {
	if quote != `"` {
		return false
	}
	n := 0
	for k--; k >= 0 && s[k] == '\\'; k-- {
		n++
	}
	return n%2 == 1
}

func stripComment(s string) string {
	if i := strings.IndexByte(s, '#'); i >= 0 && !strings.ContainsAny(s[:i], `"'`) {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// normalizeKey turns `mcp_servers . "sbx"` into mcp_servers.sbx.
func normalizeKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// editTOML sets each setting in data, changing only the lines it must:
// an existing key's line is replaced, a missing key goes after the last key
// of its table, a missing table is added at the end. It returns the new text
// and the settings it changed (none: data already had them all). The result
// is decoded and compared with the input: every other value must be
// unchanged and every setting must read back as wanted, or it is an error.
func editTOML(data []byte, settings []tomlSetting) ([]byte, []tomlSetting, error) {
	var before map[string]any
	if _, err := toml.Decode(string(data), &before); err != nil {
		return nil, nil, fmt.Errorf("not valid TOML: %w", err)
	}
	if before == nil {
		before = map[string]any{}
	}
	text := string(data)
	var changed []tomlSetting
	for _, s := range settings {
		if got, ok := lookup(before, s.table, s.key); ok && reflect.DeepEqual(got, s.want) {
			continue
		}
		text = setTOMLLine(text, s)
		changed = append(changed, s)
	}
	if len(changed) == 0 {
		return data, nil, nil
	}
	var after map[string]any
	if _, err := toml.Decode(text, &after); err != nil {
		return nil, nil, fmt.Errorf("the edit would not be valid TOML (%v): the file uses a layout sbx does not edit (dotted keys or inline tables for these tables?)", err)
	}
	expect := deepCopy(before).(map[string]any)
	for _, s := range settings {
		t := expect
		if s.table != "" {
			for _, p := range strings.Split(s.table, ".") {
				sub, ok := t[p].(map[string]any)
				if !ok {
					sub = map[string]any{}
					t[p] = sub
				}
				t = sub
			}
		}
		t[s.key] = s.want
	}
	if !reflect.DeepEqual(after, expect) {
		return nil, nil, fmt.Errorf("the edit would change more than sbx's keys: the file uses a layout sbx does not edit (dotted keys or inline tables for these tables?)")
	}
	return []byte(text), changed, nil
}

func lookup(m map[string]any, table, key string) (any, bool) {
	if table != "" {
		for _, p := range strings.Split(table, ".") {
			sub, ok := m[p].(map[string]any)
			if !ok {
				return nil, false
			}
			m = sub
		}
	}
	v, ok := m[key]
	return v, ok
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

func setTOMLLine(text string, s tomlSetting) string {
	trailingNL := strings.HasSuffix(text, "\n") || text == ""
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	line := s.key + " = " + s.value
	sts := scanTOML(lines)
	table := ""
	start, lastKey, end := -1, -1, len(lines) // start: header line; lastKey: last key/value's last line
	if s.table == "" {
		start = -1
		end = len(lines)
	}
	found := s.table == ""
	for _, st := range sts {
		if st.header != "" {
			if found && table == s.table {
				end = st.first
				break
			}
			table = st.header
			if table == s.table {
				found, start = true, st.first
			}
			continue
		}
		if table != s.table || !found {
			continue
		}
		if st.key == s.key {
			out := append(append(append([]string{}, lines[:st.first]...), line), lines[st.last+1:]...)
			return join(out, trailingNL)
		}
		lastKey = st.last
	}
	switch {
	case !found:
		if len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) != "" {
			lines = append(lines, "")
		}
		lines = append(lines, "["+s.table+"]", line)
		return join(lines, true)
	case lastKey >= 0:
		return join(insert(lines, lastKey+1, line), trailingNL)
	case s.table != "":
		return join(insert(lines, start+1, line), trailingNL)
	default:
		// A top level without keys: before the first table and the comment
		// block directly above it.
		at := end
		for _, st := range sts {
			if st.header != "" {
				at = st.first
				break
			}
		}
		for at > 0 && strings.HasPrefix(strings.TrimSpace(lines[at-1]), "#") {
			at--
		}
		add := []string{line}
		if at < len(lines) {
			add = append(add, "")
		}
		return join(insert(lines, at, add...), trailingNL)
	}
}

func insert(lines []string, at int, add ...string) []string {
	out := append([]string{}, lines[:at]...)
	out = append(out, add...)
	return append(out, lines[at:]...)
}

func join(lines []string, trailingNL bool) string {
	var b bytes.Buffer
	b.WriteString(strings.Join(lines, "\n"))
	if trailingNL && len(lines) > 0 {
		b.WriteByte('\n')
	}
	return b.String()
}

func decodeTOML(data []byte, v *map[string]any) error {
	_, err := toml.Decode(string(data), v)
	return err
}
