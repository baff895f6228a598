package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDispatch: each row names the case; the table's Funcs record what they
// got, so a row that reaches the wrong Func or the wrong arguments fails.
func TestDispatch(t *testing.T) {
	var got []string
	rec := func(name string) Func {
		return func(_ context.Context, _ *Env, args []string) int {
			got = append([]string{name}, args...)
			return 7
		}
	}
	cmds := []Command{
		{Name: "ls", Aliases: []string{"list"}, Run: rec("ls"), Cluster: rec("ls-cluster"), Usage: "  ls   list\n"},
		{Name: "exec", Run: rec("exec"), Usage: "  exec run\n"},
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // nil: no Func ran
		out  string   // in stdout+stderr
	}{
		{"a row by its name", []string{"exec", "--", "x"}, 7, []string{"exec", "--", "x"}, ""},
		{"a row by its alias", []string{"list"}, 7, []string{"ls"}, ""},
		{"--backend cluster goes to Cluster without the flag", []string{"ls", "-x", "--backend", "cluster", "y"}, 7, []string{"ls-cluster", "-x", "y"}, ""},
		{"--backend=cluster too", []string{"list", "--backend=cluster"}, 7, []string{"ls-cluster"}, ""},
		{"another backend stays on Run", []string{"ls", "--backend", "local"}, 7, []string{"ls", "--backend", "local"}, ""},
		{"no Cluster: the flag is the Func's", []string{"exec", "--backend", "cluster"}, 7, []string{"exec", "--backend", "cluster"}, ""},
		{"unknown", []string{"frob"}, ExitUsage, nil, `unknown command "frob"`},
		{"nothing", nil, ExitUsage, nil, "  ls   list\n  exec run\n"},
		{"help", []string{"--help"}, 0, nil, "usage: sbx <command> [flags]\n\ncommands:\n  ls   list\n  exec run\n\nExit status"},
	} {
		got = nil
		var out, errb bytes.Buffer
		e := &Env{Stdout: &out, Stderr: &errb}
		code := e.Dispatch(context.Background(), c.args, cmds)
		if code != c.code || !slices.Equal(got, c.want) || !strings.Contains(out.String()+errb.String(), c.out) {
			t.Errorf("%s: %v: exit %d, ran %q, printed %q; want %d, %q, %q", c.name, c.args, code, got, out.String()+errb.String(), c.code, c.want, c.out)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, c := range []struct {
		d    string
		want string
	}{{"59s", "59s"}, {"61s", "1m"}, {"3h1m", "3h"}, {"47h59m", "47h"}, {"48h", "2d"}} {
		d, err := time.ParseDuration(c.d)
		if err != nil {
			t.Fatal(err)
		}
		if got := Human(d); got != c.want {
			t.Errorf("Human(%s) = %s, want %s", c.d, got, c.want)
		}
	}
}
