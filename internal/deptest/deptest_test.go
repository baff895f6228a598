package deptest

import (
	"strings"
	"testing"
)

// The checker itself must be able to fail: a synthetic graph with a known
// forbidden chain, and a real package (tools) that does import the MCP SDK.
func TestViolationsSynthetic(t *testing.T) {
	pkgs := map[string]Pkg{
		"ex/a":               {ImportPath: "ex/a", Imports: []string{"fmt", "ex/b", "ex/ok"}},
		"ex/b":               {ImportPath: "ex/b", Imports: []string{"k8s.io/api/core/v1"}},
		"ex/ok":              {ImportPath: "ex/ok", Imports: []string{"ex/hidden"}},
		"ex/hidden":          {ImportPath: "ex/hidden"},
		"fmt":                {ImportPath: "fmt", Standard: true},
		"k8s.io/api/core/v1": {ImportPath: "k8s.io/api/core/v1"},
	}
	got := Rule{Package: "ex/a", Bad: map[string]string{"k8s.io/": "no kubernetes"}}.Violations(pkgs)
	if len(got) != 1 || !strings.Contains(got[0], "ex/a -> ex/b -> k8s.io/api/core/v1") || !strings.Contains(got[0], "no kubernetes") {
		t.Errorf("Bad rule: got %q, want one violation naming the chain ex/a -> ex/b -> k8s.io/api/core/v1 and its reason", got)
	}
	got = Rule{Package: "ex/a", OnlyStd: true, Allow: []string{"ex/ok"}}.Violations(pkgs)
	if len(got) != 1 || !strings.Contains(got[0], "imports ex/b ") {
		t.Errorf("OnlyStd rule: got %q, want exactly ex/b (ex/ok is allowed and not descended into, fmt is standard)", got)
	}
	if got := (Rule{Package: "ex/ok", OnlyStd: true, Allow: []string{"ex/hidden"}}).Violations(pkgs); len(got) != 0 {
		t.Errorf("allowed-only graph: got %q, want no violation", got)
	}
}

func TestViolationsReal(t *testing.T) {
	const tools = "github.com/sbx-sh/sbx/tools"
	pkgs, err := List(tools, "linux")
	if err != nil {
		t.Fatal(err)
	}
	got := Rule{Package: tools, Bad: map[string]string{"github.com/modelcontextprotocol/go-sdk": "test"}}.Violations(pkgs)
	if len(got) == 0 {
		t.Fatalf("tools imports the MCP SDK, yet the rule found nothing: the checker cannot fail")
	}
	for _, v := range got {
		if !strings.Contains(v, tools+" -> github.com/modelcontextprotocol/go-sdk/") {
			t.Errorf("violation %q does not name the chain from tools", v)
		}
	}
}
