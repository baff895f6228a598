package mcptest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShellErrorsAsBash: the agent sees what `bash -c "$command"` prints,
// with the command's own line numbers, never sbx's wrapper.
func TestShellErrorsAsBash(t *testing.T) {
	e := newEnv(t)
	c := e.stdio()
	bash := func(command string) string {
		t.Helper()
		out, _ := exec.Command("bash", "-c", command).CombinedOutput()
		return string(out)
	}
	for _, tc := range []struct{ name, command string }{
		{"command not found", "nonexistent_cmd_xyz"},
		{"third line", "echo a\necho b\nnonexistent_cmd_xyz"},
		{"syntax error echoes the command alone", "; x"},
		{"unterminated", "true\nif"},
		{"LINENO", "echo $LINENO\necho $LINENO"},
		{"$0 and arguments", `echo "$0" $#`},
		{"no BASH_ENV, the command's own text", `echo "${BASH_ENV-unset}"; echo "$BASH_EXECUTION_STRING"`},
		{"fd 4 closed", `ls /proc/self/fd/4 2>&1 | sed 's/ls: //'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.with(t).call("bash", map[string]any{"command": tc.command})
			want := strings.TrimRight(bash(tc.command), "\n")
			out := text(got)
			out = out[:strings.LastIndex(out, "\nExit code: ")]
			if out != want {
				t.Errorf("sbx bash printed\n%s\nbash -c prints\n%s", out, want)
			}
			if strings.Contains(out, "sbx") {
				t.Errorf("the wrapper shows: %s", out)
			}
		})
	}
	t.Run("cwd still tracked", func(t *testing.T) {
		c := c.with(t)
		c.bash("cd /usr")
		wantContains(t, c.bash("pwd"), "/usr\n")
		c.bash("cd " + e.code)
	})
	t.Run("file tools", func(t *testing.T) {
		c := c.with(t)
		got := c.fails("write", map[string]any{"file_path": "/usr/sbx-not-writable", "content": "x"})
		if want := "cannot write /usr/sbx-not-writable: Read-only file system"; !strings.Contains(got, want) {
			t.Errorf("write to a read-only dir: %q, want %q", got, want)
		}
		if strings.Contains(got, "sbx:") || strings.Contains(got, "create") {
			t.Errorf("the file script's shell shows: %s", got)
		}
	})
}
