package mcptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var acceptRE = regexp.MustCompile("`(sbx accept --deletions --session \\S+)`")

// rm -rf through the MCP bash tool: the deletions wait, the result says what
// happened and the exact command the user runs, later calls work and do not
// get the files back, and that command applies the deletions.
func TestMassDeletionHeldThroughMCP(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 25; i++ {
		e.write(fmt.Sprintf("src/f%02d.go", i), fmt.Sprintf("package f // %d\n", i))
	}
	c := e.stdio()
	out := c.bash("rm -rf src && echo removed")
	wantContains(t, out, "removed", "Held: this command's deletions were not applied to the host, because "+e.code+": it deletes all 25 files of the code dir",
		filepath.Join(e.code, "src"), "The user decides (not the agent)", "--reject-deletions")
	m := acceptRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the result names no accept command:\n%s", out)
	}
	if e.read("src/f07.go") != "package f // 7\n" {
		t.Fatal("a held deletion was applied to the host")
	}
	out = c.bash("ls src 2>&1; echo later > later.txt")
	wantContains(t, out, "No such file", "deletions of an earlier command still wait")
	if e.read("later.txt") != "later\n" {
		t.Fatalf("a later command's work did not come back: %q", e.read("later.txt"))
	}
	args := strings.Fields(m[1])[1:]
	cmd := exec.Command(sbxBinary(t), args...)
	cmd.Dir, cmd.Env = e.code, e.vars
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", m[1], err, res)
	}
	if _, err := os.Stat(filepath.Join(e.code, "src", "f07.go")); err == nil {
		t.Fatalf("%s did not delete the held files:\n%s", m[1], res)
	}
	out = c.bash("ls")
	if strings.Contains(out, "still wait") || strings.Contains(out, "src") {
		t.Fatalf("after accept:\n%s", out)
	}
}
