package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// codexCall runs `codex exec` against a local Responses API whose model
// answers with item (a tool call), then with a message once Codex sends the
// call's output back; it returns that output (an item of type outputType).
// flags go to codex exec before its prompt.
func (w *setupWorld) codexCall(item map[string]any, outputType string, flags ...string) string {
	t := w.t
	t.Helper()
	var mu sync.Mutex
	var toolOutput string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
			http.NotFound(rw, r)
			return
		}
		var req struct {
			Input []map[string]any `json:"input"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		answered := false
		for _, it := range req.Input {
			if it["type"] == outputType {
				answered = true
				b, _ := json.Marshal(it["output"])
				mu.Lock()
				toolOutput = string(b)
				mu.Unlock()
			}
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriter(rw)
		ev := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", v["type"], b)
		}
		ev(map[string]any{"type": "response.created", "response": map[string]any{"id": "r"}})
		out := map[string]any{"type": "message", "id": "m", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "done"}}}
		if !answered {
			out = item
		}
		ev(map[string]any{"type": "response.output_item.done", "item": out})
		ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": "r", "usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}})
		bw.Flush()
	})}
	go srv.Serve(ln)
	defer srv.Close()
	cmd := exec.Command(filepath.Join(w.bin, "codex"), "exec", "--skip-git-repo-check",
		"-c", `model_provider="sbxtest"`,
		"-c", `model_providers.sbxtest={name="sbxtest", base_url="http://`+ln.Addr().String()+`/v1", wire_api="responses", supports_websockets=false}`,
		"hi")
	cmd.Args = append(cmd.Args[:2], append(flags, cmd.Args[2:]...)...)
	cmd.Dir, cmd.Env = w.proj, w.vars
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if toolOutput == "" {
		t.Fatalf("codex never sent the call's output back:\n%s", out.String())
	}
	return toolOutput
}

// TestCodexAppliesPatchThroughSbx: after sbx setup codex, the real Codex
// CLI calls sbx's apply_patch (mcp__sbx__apply_patch) with its own patch
// grammar, and the file reaches the project through the sandbox.
func TestCodexAppliesPatchThroughSbx(t *testing.T) {
	w := newSetupWorld(t, true)
	if out, code := w.sbx("setup", "codex"); code != 0 {
		t.Fatalf("setup codex: exit %d\n%s", code, out)
	}
	patch := "*** Begin Patch\n*** Add File: via-sbx.txt\n+written through sbx\n*** End Patch\n"
	// Codex 0.171 gives the model its tools, MCP ones included, as methods
	// of `tools` in the JavaScript of its `exec` tool.
	arg, _ := json.Marshal(map[string]any{"input": patch})
	js := "const r = await tools.mcp__sbx__apply_patch(" + string(arg) + ");\ntext(JSON.stringify(r));"
	got := w.codexCall(map[string]any{"type": "custom_tool_call", "id": "c", "call_id": "call_1", "name": "exec", "input": js, "status": "completed"}, "custom_tool_call_output")
	if !strings.Contains(got, "Success. Updated the following files:") {
		t.Fatalf("Codex's output of mcp__sbx__apply_patch: %s", got)
	}
	if c := readOrMissing(filepath.Join(w.proj, "via-sbx.txt")); c != "written through sbx\n" {
		t.Fatalf("the project's via-sbx.txt: %q", c)
	}
	w.sbx("setup", "codex", "--undo")
}
