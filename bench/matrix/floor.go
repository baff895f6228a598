package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sbx-sh/sbx/local"
	"github.com/sbx-sh/sbx/sandbox"
)

// The floor of the warm row: an MCP server on the same SDK that does nothing
// but the raw exec. It is this binary again (floorEnv names the sandbox to
// attach to), serving over the SDK's own stdio transport one tool, bash,
// whose handler is registered raw (no schema derivation or validation: the
// least a tool call through this SDK costs) and runs the command as the raw
// row does (`/bin/bash -c <command>`, no environment, no output, no sync, no
// session). What a bash call through sbx-mcp costs over this floor is sbx's
// own: the engine, its tool layer and transport; what the floor costs over
// the raw exec is the protocol through the SDK, client and server.
const (
	floorEnv      = "SBX_MATRIX_FLOOR"       // the sandbox's session name
	floorStateEnv = "SBX_MATRIX_FLOOR_STATE" // its state dir
	floorVerEnv   = "SBX_MATRIX_FLOOR_VERSION"
)

// serveFloor serves the floor server on stdio until its client hangs up.
func serveFloor() int {
	p := &local.Provider{Version: os.Getenv(floorVerEnv)}
	sb, err := p.Attach(context.Background(), sandbox.Spec{Name: os.Getenv(floorEnv), StateDir: os.Getenv(floorStateEnv)})
	if err != nil {
		fmt.Fprintf(os.Stderr, "matrix floor: attach to the sandbox: %v\n", err)
		return 1
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "matrix-floor"}, nil)
	s.AddTool(&mcp.Tool{Name: "bash", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Command string `json:"command"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		r, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"/bin/bash", "-c", in.Command}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Exit code: %d", r.ExitCode)}}}, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintf(os.Stderr, "matrix floor: %v\n", err)
	}
	return 0
}

// startFloor starts the floor server on the sandbox of the session name,
// whose state dir is dir.
func (b *bench) startFloor(name, dir string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append([]string{}, b.env...), floorEnv+"="+name, floorStateEnv+"="+dir, floorVerEnv+"="+b.version)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "matrix"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("start the floor server: %w", err)
	}
	return &server{name: "floor", cmd: cmd, cs: cs}, nil
}
