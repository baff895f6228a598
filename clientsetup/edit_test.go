package clientsetup

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestEditTOML(t *testing.T) {
	set := []tomlSetting{
		{"", "sandbox_mode", `"read-only"`, "read-only"},
		{"features", "shell_tool", "false", false},
		{"mcp_servers.sbx", "default_tools_approval_mode", `"approve"`, "approve"},
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty file", "", "sandbox_mode = \"read-only\"\n\n[features]\nshell_tool = false\n\n[mcp_servers.sbx]\ndefault_tools_approval_mode = \"approve\"\n"},
		{"keys replaced in place, comments kept",
			"# mine\nsandbox_mode = \"workspace-write\" # old\nmodel = \"o3\"\n\n[features]\n# c\nshell_tool = true\nx = 1\n\n[mcp_servers.sbx]\ncommand = \"sbx-mcp\"\n",
			"# mine\nsandbox_mode = \"read-only\"\nmodel = \"o3\"\n\n[features]\n# c\nshell_tool = false\nx = 1\n\n[mcp_servers.sbx]\ncommand = \"sbx-mcp\"\ndefault_tools_approval_mode = \"approve\"\n"},
		{"top-level key goes above the first table's comment",
			"# title\n\n# features\n[features]\nshell_tool = false\n[mcp_servers.sbx]\ndefault_tools_approval_mode = \"approve\"\n",
			"# title\n\nsandbox_mode = \"read-only\"\n\n# features\n[features]\nshell_tool = false\n[mcp_servers.sbx]\ndefault_tools_approval_mode = \"approve\"\n"},
		{"multi-line array is one statement",
			"sandbox_mode = \"read-only\"\n[features]\nlist = [\n  \"[not a table]\",\n]\n[mcp_servers.sbx]\nargs = \"\"\"\n[x]\n\"\"\"\n",
			"sandbox_mode = \"read-only\"\n[features]\nlist = [\n  \"[not a table]\",\n]\nshell_tool = false\n[mcp_servers.sbx]\nargs = \"\"\"\n[x]\n\"\"\"\ndefault_tools_approval_mode = \"approve\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := editTOML([]byte(tc.in), set)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			again, changed, err := editTOML(got, set)
			if err != nil || len(changed) != 0 || string(again) != string(got) {
				t.Fatalf("second edit changed %v (err %v)", changed, err)
			}
		})
	}
	// Layouts the line editor does not handle are refused, not mangled.
	for _, in := range []string{"features = { shell_tool = true }\n", "features.shell_tool = true\n", "not toml ["} {
		if _, _, err := editTOML([]byte(in), set); err == nil {
			t.Errorf("%q: edit accepted", in)
		}
	}
}

func TestEditJSON(t *testing.T) {
	in := `{"z": 1, "permissions": {"deny": ["Bash", "WebFetch"], "ask": []}, "a": {"b": "<&>"}}`
	root, err := parseJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	perms, _ := root.object("permissions", "settings")
	added, err := perms.addStrings("deny", "permissions", "Bash", "Read")
	if err != nil || !reflect.DeepEqual(added, []string{"Read"}) {
		t.Fatalf("added %v, %v", added, err)
	}
	want := "{\n  \"z\": 1,\n  \"permissions\": {\n    \"deny\": [\n      \"Bash\",\n      \"WebFetch\",\n      \"Read\"\n    ],\n    \"ask\": []\n  },\n  \"a\": {\n    \"b\": \"<&>\"\n  }\n}\n"
	if got := string(root.encode()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := root.addStrings("z", "settings", "x"); err == nil {
		t.Error("a number taken for an array")
	}
	if _, err := parseJSON([]byte(`{"a":1,"a":2}`)); !errors.Is(err, errDuplicateKey) {
		t.Errorf("duplicate key: %v", err)
	}
}

// FuzzParseJSON: the ordered parser agrees with encoding/json, and what it
// writes reads back the same.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.50,"x",null,true,{"b":{}}]}`, `[]`, `"\u00e9<"`, `{"a":1,"a":2}`, ` `, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		n, err := parseJSON(data)
		if err != nil {
			if valid && !errors.Is(err, errDuplicateKey) {
				t.Fatalf("refused valid JSON: %v", err)
			}
			return
		}
		if strings.TrimSpace(string(data)) == "" {
			return
		}
		if !valid {
			t.Fatal("read invalid JSON")
		}
		var want any
		if json.Unmarshal(data, &want) != nil {
			return // valid but out of float64's range: kept as text, nothing to compare
		}
		if !reflect.DeepEqual(n.plain(), want) {
			t.Fatalf("parsed %#v, encoding/json %#v", n.plain(), want)
		}
		var back any
		if err := json.Unmarshal(n.encode(), &back); err != nil || !reflect.DeepEqual(back, want) {
			t.Fatalf("encode does not read back: %v", err)
		}
	})
}

// FuzzEditTOML: on any file the TOML decoder reads, the edit either refuses
// or gives a file the decoder reads as the old values plus sbx's settings,
// and a second edit changes nothing.
func FuzzEditTOML(f *testing.F) {
	for _, s := range []string{"", "a = 1\n[features]\nshell_tool = true\n", "[mcp_servers.sbx]\nargs = [\n\"[x]\"]\n", "s = '''\n[features]\n'''\n", "[features] # c\n"} {
		f.Add(s)
	}
	set := append([]tomlSetting{}, codexSettings...)
	f.Fuzz(func(t *testing.T, in string) {
		var before map[string]any
		if _, err := toml.Decode(in, &before); err != nil {
			return
		}
		out, _, err := editTOML([]byte(in), set)
		if err != nil {
			return
		}
		var after map[string]any
		if _, err := toml.Decode(string(out), &after); err != nil {
			t.Fatalf("edit gave invalid TOML: %v\n%s", err, out)
		}
		for _, s := range set {
			if v, ok := lookup(after, s.table, s.key); !ok || !reflect.DeepEqual(v, s.want) {
				t.Fatalf("%s.%s = %v after the edit", s.table, s.key, v)
			}
		}
		for k, v := range before {
			if k == "sandbox_mode" || k == "approval_policy" || k == "features" || k == "mcp_servers" {
				continue
			}
			if !reflect.DeepEqual(after[k], v) {
				t.Fatalf("%s changed: %v -> %v", k, v, after[k])
			}
		}
		if again, changed, err := editTOML(out, set); err != nil || len(changed) > 0 || string(again) != string(out) {
			t.Fatalf("second edit changed %v (%v)", changed, err)
		}
	})
}
