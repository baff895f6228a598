package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listTools returns the tools exactly as a client sees them.
func listTools(t *testing.T) []*mcp.Tool {
	t.Helper()
	p := NewSessions(Config{Err: errors.New("no engine in this test")})
	t.Cleanup(func() { p.Close(context.Background()) })
	server := NewServer("test", p)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// TestToolSnaps compares each tool's JSON with __toolsnaps__/<name>.snap, so
// that a change to what agents see is a reviewed diff. UPDATE_TOOLSNAPS=true
// rewrites the snapshots.
func TestToolSnaps(t *testing.T) {
	update := os.Getenv("UPDATE_TOOLSNAPS") == "true"
	seen := map[string]bool{}
	for _, tool := range listTools(t) {
		seen[tool.Name+".snap"] = true
		got, err := json.MarshalIndent(tool, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("__toolsnaps__", tool.Name+".snap")
		if update {
			if err := os.MkdirAll("__toolsnaps__", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("tool %s has no snapshot %s (run UPDATE_TOOLSNAPS=true go test ./tools/ and review the diff): %v", tool.Name, path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("tool %s differs from its snapshot %s: if the change is intended, run UPDATE_TOOLSNAPS=true go test ./tools/ and review the diff\ngot:\n%s", tool.Name, path, got)
		}
	}
	entries, _ := os.ReadDir("__toolsnaps__")
	for _, e := range entries {
		if !seen[e.Name()] {
			if update {
				os.Remove(filepath.Join("__toolsnaps__", e.Name()))
				continue
			}
			t.Errorf("snapshot %s has no tool: remove it", e.Name())
		}
	}
}

// TestInventory checks what every client needs of every tool.
func TestInventory(t *testing.T) {
	tools := listTools(t)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil {
			t.Errorf("%s has no annotations", tool.Name)
			continue
		}
		if tool.Annotations.Title == "" {
			t.Errorf("%s has no title", tool.Name)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema map[string]any
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		if schema["type"] != "object" {
			t.Errorf("%s: input schema type %v, want object", tool.Name, schema["type"])
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if _, ok := schema[k]; ok {
				t.Errorf("%s: input schema has a top-level %s, which some clients reject", tool.Name, k)
			}
		}
	}
	// The SDK lists tools by name: a stable order.
	if got, want := strings.Join(names, ","), "apply_patch,bash,bash_kill,bash_output,edit,port,read,release,write"; got != want {
		t.Errorf("tools listed as %s, want %s", got, want)
	}
	readOnly := map[string]bool{"read": true, "bash_output": true}
	for _, tool := range tools {
		if tool.Annotations != nil && tool.Annotations.ReadOnlyHint != readOnly[tool.Name] {
			t.Errorf("%s: readOnlyHint %v, want %v", tool.Name, tool.Annotations.ReadOnlyHint, readOnly[tool.Name])
		}
	}
}
