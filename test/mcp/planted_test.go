package mcptest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxNamesEscapedInResults: file names with terminal escape
// sequences, chosen in the sandbox, come back in the bash tool's result
// escaped, in the quarantine and the refusal lines (the MCP client shows the
// text to the user's terminal as it is).
func TestSandboxNamesEscapedInResults(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	got := c.bash(`mkdir -p .claude .git/hooks && touch ".claude/$(printf 'a\033]52;c;ZXZpbA==\007b')" ".git/hooks/$(printf 'c\033[2Jd')" && echo made`)
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Fatalf("raw escape sequence in the result: %q", got)
	}
	wantContains(t, got,
		`Quarantined: "`+filepath.Join(e.code, ".claude")+`/a\x1b]52;c;ZXZpbA==\ab"`,
		`Not brought back to the host: "`+filepath.Join(e.code, ".git/hooks")+`/c\x1b[2Jd"`)
}
