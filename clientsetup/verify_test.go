package clientsetup

import "testing"

// TestClaudeConnected: the line of `claude mcp list` that verify accepts:
// sbx running sbx-mcp, its status last on the line.
func TestClaudeConnected(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      bool
	}{
		{"sbx-mcp connected", "Checking MCP server health…\n\nsbx: sbx-mcp  - ✔ Connected\n", true},
		{"older check mark", "sbx: sbx-mcp  - ✓ Connected\n", true},
		{"a path to sbx-mcp with arguments", "sbx: /home/u/go/bin/sbx-mcp --code-dir /src - ✔ Connected\n", true},
		{"pending approval", "sbx: sbx-mcp  - ⏸ Pending approval (run `claude` to approve)\n", false},
		{"failed", "sbx: sbx-mcp  - ✗ Failed to connect\n", false},
		{"Connected in the arguments", "sbx: sh -c echo Connected - ✔ Connected; exec sbx-mcp - ⏸ Pending approval (run `claude` to approve)\n", false},
		{"sbx-mcp in the arguments of another command", "sbx: sh -c exec sbx-mcp - ✔ Connected\n", false},
		{"another program named like it", "sbx: evil-sbx-mcp - ✔ Connected\n", false},
		{"another server connected", "other: sbx-mcp - ✔ Connected\nsbx: sh - ✗ Failed to connect\n", false},
	} {
		if got := claudeConnected.MatchString(tc.out); got != tc.want {
			t.Errorf("%s: %q matched %v, want %v", tc.name, tc.out, got, tc.want)
		}
	}
}
