package hostenv

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var renderTests = []struct {
	name string
	kvs  []KV
	want string // expected text after the header comment; "" to skip
}{
	{name: "empty", kvs: nil, want: ""},
	{name: "simple", kvs: []KV{{Key: "user.name", Value: "Me"}, {Key: "user.email", Value: "me@x"}},
		want: "[user]\n\tname = \"Me\"\n\temail = \"me@x\"\n"},
	{name: "no value and empty value", kvs: []KV{{Key: "branch.main.rebase", NoValue: true}, {Key: "branch.main.merge", Value: ""}},
		want: "[branch \"main\"]\n\trebase\n\tmerge = \"\"\n"},
	{name: "repeated key keeps order", kvs: []KV{
		{Key: "remote.origin.fetch", Value: "a"}, {Key: "remote.origin.url", Value: "u"}, {Key: "remote.origin.fetch", Value: "b"}},
		want: "[remote \"origin\"]\n\tfetch = \"a\"\n\turl = \"u\"\n\tfetch = \"b\"\n"},
	{name: "section comes back", kvs: []KV{{Key: "core.bare", Value: "false"}, {Key: "user.name", Value: "x"}, {Key: "core.eol", Value: "lf"}},
		want: "[core]\n\tbare = \"false\"\n[user]\n\tname = \"x\"\n[core]\n\teol = \"lf\"\n"},
	{name: "dotted subsection", kvs: []KV{{Key: "remote.my.fork.url", Value: "git@h:r"}},
		want: "[remote \"my.fork\"]\n\turl = \"git@h:r\"\n"},
	{name: "empty subsection", kvs: []KV{{Key: "a..b", Value: "1"}}, want: "[a \"\"]\n\tb = \"1\"\n"},
	{name: "subsection escapes", kvs: []KV{{Key: `x.a"b\c.k`, Value: "1"}}, want: "[x \"a\\\"b\\\\c\"]\n\tk = \"1\"\n"},
	{name: "value escapes", kvs: []KV{{Key: "a.b", Value: "q\"b\\n\nt\tx\by"}}, want: "[a]\n\tb = \"q\\\"b\\\\n\\nt\\tx\\by\"\n"},
	{name: "comment chars and spaces", kvs: []KV{{Key: "a.b", Value: "  # not ; a comment  "}}},
	{name: "carriage returns", kvs: []KV{{Key: "a.b\r.c", Value: "x\r"}, {Key: "a.b\r.d", Value: "\r\r"}}},
	{name: "unicode and bytes", kvs: []KV{{Key: "a.é\xff.c", Value: "é\xff\x01\x7f"}}},
	{name: "brackets and comment chars in subsection", kvs: []KV{{Key: "x. a]b[#;= .k", Value: "]"}}},
	{name: "leading and trailing blanks", kvs: []KV{{Key: "a.b", Value: " \t x \t "}, {Key: "a. .b", Value: "\\"}}},
	{name: "digits and dashes", kvs: []KV{{Key: "a-1.b-2", Value: "0"}}},
}

func TestRenderRoundTrip(t *testing.T) {
	requireGit(t)
	for _, tt := range renderTests {
		t.Run(tt.name, func(t *testing.T) {
			text := roundTrip(t, tt.kvs)
			body := text[strings.IndexByte(text, '\n')+1:]
			if tt.want != "" && body != tt.want {
				t.Errorf("Render =\n%s\nwant\n%s", body, tt.want)
			}
		})
	}
}

// roundTrip renders kvs, reads the file back with the real git and fails
// unless it gets kvs again.
func roundTrip(t testing.TB, kvs []KV) string {
	t.Helper()
	text, err := Render(kvs)
	if err != nil {
		t.Fatalf("Render(%#v): %v", kvs, err)
	}
	path := filepath.Join(t.TempDir(), "config")
	writeFile(t, path, text)
	got, err := ReadConfig(context.Background(), path)
	if err != nil {
		t.Fatalf("git rejects Render output: %v\n%s", err, text)
	}
	if !slices.Equal(got, kvs) {
		t.Fatalf("git reads back\n%#v\nwant\n%#v\nfile:\n%s", got, kvs, text)
	}
	return text
}

func TestRenderRefuses(t *testing.T) {
	tests := []struct {
		name    string
		kv      KV
		wantErr string
	}{
		{"no section", KV{Key: "name"}, `key "name" has no section`},
		{"upper-case section", KV{Key: "User.name"}, `section has 'U'`},
		{"upper-case name", KV{Key: "user.Name"}, `name must start with a-z`},
		{"name with underscore", KV{Key: "user.a_b"}, `name has '_'`},
		{"name starting with digit", KV{Key: "user.1a"}, `name must start with a-z`},
		{"newline in subsection", KV{Key: "a.b\nc.d"}, `subsection has a newline`},
		{"NUL in value", KV{Key: "url.https://u:p@h/.insteadof", Value: "a\x00b"}, `entry 1 (url.<redacted>.insteadof): value has a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render([]KV{tt.kv})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
