package session

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Params.Env reaches every command, a background job's too, after the
// fixed base (the cluster pool's cache variables come this way: the
// cluster backend passes exactly this environment).
func TestParamsEnvReachesCommands(t *testing.T) {
	f := newFixture(t)
	params := Params{CodeDirs: []string{f.code}, IdleTTL: time.Hour, Env: []string{"GOMODCACHE=/cache/go-mod", "SBX_TEST_PARAM=1"}}
	s, err := f.mgr.Open(context.Background(), "paramsenv", params)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(context.Background())
	out, o := sh(t, s, "echo mod=$GOMODCACHE p=$SBX_TEST_PARAM home=$HOME")
	if o.ExitCode != 0 || strings.TrimSpace(out) != "mod=/cache/go-mod p=1 home=/home/sbx" {
		t.Fatalf("exit %d: %q", o.ExitCode, out)
	}
	j, err := s.Spawn(context.Background(), Run{Command: "test \"$GOMODCACHE\" = /cache/go-mod"})
	if err != nil {
		t.Fatal(err)
	}
	<-j.Done()
	if jo, err := j.Wait(); err != nil || jo.ExitCode != 0 {
		t.Fatalf("background job: exit %d, %v", jo.ExitCode, err)
	}
}
