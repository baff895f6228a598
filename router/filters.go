package router

import "strings"

// filterSpec is the allowlist for one filter: short options only, each with or
// without a value, and a rule for operands. No filter may name a file: it reads
// the pipe and writes its stdout.
type filterSpec struct {
	flags  string                     // short options without a value
	values map[byte]func(string) bool // short options with a value (attached or next word)
	// dashNum accepts the obsolete "-NUM" form when it is the only argument.
	dashNum bool
	// operands checks the non-option arguments; hasE says grep got -e.
	operands func(ops []string, hasE bool) *refusal
	// noDashDash refuses "--" (jq 1.6 reads it as an error).
	noDashDash bool
}

func anyValue(string) bool { return true }

func oneChar(v string) bool { return len(v) == 1 }

func count(v string) bool { return isDigits(strings.TrimPrefix(v, "-")) }

func signedCount(v string) bool {
	return isDigits(strings.TrimPrefix(strings.TrimPrefix(v, "+"), "-"))
}

func fieldList(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= '0' && c <= '9' || c == ',' || c == '-') {
			return false
		}
	}
	return true
}

func keyDef(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(isAlnum(c) || c == '.' || c == ',') {
			return false
		}
	}
	return true
}

func noOperands(name string) func([]string, bool) *refusal {
	return func(ops []string, _ bool) *refusal {
		if len(ops) > 0 {
			return refuse("%s reads only its pipe; file operand %s is not allowed on the host", name, quote(ops[0]))
		}
		return nil
	}
}

var filters = map[string]*filterSpec{
	"grep": {
		flags: "ivncoqsEFGPwxhHaIlLzb",
		values: map[byte]func(string) bool{
			'm': isDigits, 'A': isDigits, 'B': isDigits, 'C': isDigits, 'e': anyValue,
		},
		operands: func(ops []string, hasE bool) *refusal {
			want := 1
			if hasE {
				want = 0
			}
			if len(ops) > want {
				return refuse("grep reads only its pipe; file operand %s is not allowed on the host", quote(ops[want]))
			}
			if len(ops) < want {
				return refuse("grep needs a pattern")
			}
			return nil
		},
	},
	"jq": {
		flags:      "rjcnesSaMRC",
		noDashDash: true,
		operands: func(ops []string, _ bool) *refusal {
			if len(ops) > 1 {
				return refuse("jq reads only its pipe; file operand %s is not allowed on the host", quote(ops[1]))
			}
			if len(ops) == 1 {
				return checkJqProgram(ops[0])
			}
			return nil
		},
	},
	"head": {flags: "qvz", values: map[byte]func(string) bool{'n': count, 'c': count}, dashNum: true, operands: noOperands("head")},
	"tail": {flags: "qvz", values: map[byte]func(string) bool{'n': signedCount, 'c': signedCount}, dashNum: true, operands: noOperands("tail")},
	"sort": {flags: "bdfghiMnrsuVz", values: map[byte]func(string) bool{'k': keyDef, 't': oneChar}, operands: noOperands("sort")},
	"uniq": {flags: "cdDuiz", values: map[byte]func(string) bool{'f': isDigits, 's': isDigits, 'w': isDigits}, operands: noOperands("uniq")},
	"cut":  {flags: "snz", values: map[byte]func(string) bool{'d': oneChar, 'f': fieldList, 'c': fieldList, 'b': fieldList}, operands: noOperands("cut")},
	"tr": {
		flags: "cCdst",
		operands: func(ops []string, _ bool) *refusal {
			if len(ops) < 1 || len(ops) > 2 {
				return refuse("tr takes one or two sets")
			}
			return nil
		},
	},
	"wc": {flags: "lwcmL", operands: noOperands("wc")},
}

// checkFilter parses a filter's arguments the way GNU getopt does: options
// may follow operands unless "--" came first; short options bundle; a short
// option with a value takes the rest of its word or the next word. Long
// options are never accepted.
func checkFilter(name string, args []string) *refusal {
	spec := filters[name]
	if spec.dashNum && len(args) == 1 && len(args[0]) > 1 && args[0][0] == '-' && isDigits(args[0][1:]) {
		return nil
	}
	var ops []string
	hasE, done := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if done || len(a) < 2 || a[0] != '-' {
			if a == "-" && name != "tr" {
				return refuse("%s reads only its pipe; file operand \"-\" is not allowed on the host", name)
			}
			ops = append(ops, a)
			continue
		}
		if a == "--" {
			if spec.noDashDash {
				return refuse("%s option \"--\" is not allowed on the host", name)
			}
			done = true
			continue
		}
		if a[1] == '-' {
			return refuse("%s long option %s is not allowed on the host", name, quote(optName(a)))
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(spec.flags, c) >= 0 {
				continue
			}
			ok := spec.values[c]
			if ok == nil {
				return refuse("%s option %s is not allowed on the host", name, quote("-"+a[j:j+1]))
			}
			val := a[j+1:]
			if val == "" {
				if i+1 >= len(args) {
					return refuse("%s option %s needs a value", name, quote("-"+a[j:j+1]))
				}
				i++
				val = args[i]
			}
			if !ok(val) {
				return refuse("%s option %s value %s is not allowed on the host", name, quote("-"+a[j:j+1]), quote(val))
			}
			if c == 'e' {
				hasE = true
			}
			break
		}
	}
	return spec.operands(ops, hasE)
}

// jqDenied are jq names that read the environment, files or the module search
// path. A jq program is refused if any of them appears as a word anywhere in
// it (inside strings too: "\(env)" is code), except as a field name ".env".
var jqDenied = map[string]bool{
	"env": true, "ENV": true, "import": true, "include": true, "modulemeta": true,
	"input_filename": true, "get_search_list": true, "get_prog_origin": true,
	"get_jq_origin": true, "__prog_args": true, "splits_env": true,
}

func checkJqProgram(p string) *refusal {
	isStart := func(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	for i := 0; i < len(p); {
		c := p[i]
		if !isStart(c) && c != '$' {
			i++
			continue
		}
		j := i + 1
		for j < len(p) && (isStart(p[j]) || p[j] >= '0' && p[j] <= '9') {
			j++
		}
		tok := p[i:j]
		field := c != '$' && i > 0 && p[i-1] == '.' && (i < 2 || p[i-2] != '.')
		if !field && jqDenied[strings.TrimPrefix(tok, "$")] {
			return refuse("jq programs that read the environment or files (%s) are never run on the host", tok)
		}
		i = j
	}
	return nil
}
