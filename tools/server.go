package tools

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerTool is one tool: its fixed description and a way to add it, with
// its typed handler, to a server.
type ServerTool struct {
	Tool *mcp.Tool
	add  func(s *mcp.Server, log *slog.Logger)
}

// Add adds the tool to s; log receives a line per call.
func (t ServerTool) Add(s *mcp.Server, log *slog.Logger) { t.add(s, log) }

// newTool pairs a tool with its typed handler; the schemas come from the
// handler's types (json and jsonschema tags), as mcp.AddTool derives them
// (addTyped, typed.go).
func newTool[In, Out any](t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) ServerTool {
	return ServerTool{Tool: t, add: func(s *mcp.Server, log *slog.Logger) {
		if err := addTyped(s, t, wrap(t.Name, log, h)); err != nil {
			panic(err) // a tool's types that yield no schema: a programming error
		}
	}}
}

// wrap logs each call and turns a panic into an error. A returned error
// becomes a result with IsError set (the SDK does this for any error but a
// *jsonrpc.Error), so the model sees what went wrong and can correct itself.
func wrap[In, Out any](name string, log *slog.Logger, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				log.Error("tool panicked", "tool", name, "panic", r, "stack", string(debug.Stack()))
				err = fmt.Errorf("sbx-mcp: internal error in the %s tool: %v", name, r)
			}
			switch {
			case err != nil:
				log.Info("tool call failed", "tool", name, "took", time.Since(start), "err", err)
			case res != nil && res.IsError:
				log.Info("tool call failed", "tool", name, "took", time.Since(start))
			default:
				log.Debug("tool call", "tool", name, "took", time.Since(start))
			}
		}()
		return h(ctx, req, in)
	}
}

// All returns every tool. Clients see them listed by name.
func All(p *Sessions) []ServerTool {
	return []ServerTool{
		BashTool(p),
		BashOutputTool(p),
		BashKillTool(p),
		ReadTool(p),
		WriteTool(p),
		EditTool(p),
		ApplyPatchTool(p),
		ReleaseTool(p),
		PortTool(p),
	}
}

// Instructions tell the client what the server is for.
const Instructions = `sbx runs your shell commands and file edits in a disposable sandbox that holds the project's code directories at the same paths as on the host; what changes there is copied back to the host after every call. Use these tools instead of built-in shell and file tools.`

// NewServer returns an MCP server offering every tool on p.
func NewServer(version string, p *Sessions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sbx", Title: "sbx sandbox", Version: version}, &mcp.ServerOptions{
		Instructions: Instructions,
		Logger:       p.cfg.SDKLog,
		// No logging capability: logs go to stderr, not to the client.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	for _, t := range All(p) {
		t.add(s, p.log)
	}
	return s
}

// ReleaseTool releases the caller's sandbox now.
func ReleaseTool(p *Sessions) ServerTool {
	return newTool(&mcp.Tool{
		Name:        "release",
		Description: "Releases this session's sandbox now: background jobs are stopped, what changed in the code directories is copied back to the host, then the sandbox and everything else in it are deleted. The next tool call claims a fresh sandbox.",
		Annotations: &mcp.ToolAnnotations{Title: "Release the sandbox", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, p.release)
}

// ReleaseInput is the release tool's (empty) arguments.
type ReleaseInput struct{}

func (p *Sessions) release(ctx context.Context, req *mcp.CallToolRequest, _ ReleaseInput) (*mcp.CallToolResult, any, error) {
	had, err := p.releaseSession(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if !had {
		return textResult("No sandbox was claimed in this session; nothing to release."), nil, nil
	}
	return textResult("Released the sandbox. The next call claims a new one."), nil, nil
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func ptr[T any](v T) *T { return &v }

func sortStrings(s []string) []string {
	slices.Sort(s)
	return s
}
