package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/local"
)

// TestSandboxBinInCodeDirNotRun: an sbx-sandbox named in a code dir (a
// developer's SBX_SANDBOX_BIN=$PWD/bin/sbx-sandbox) is a file the sandbox
// writes: the sync brings its changes back as the user's own files, with
// the mode it chose, and the build information it carries is data a
// patched copy keeps, so the owner, mode and build checks all passed what
// the sandbox left there, and the next claim ran it, the setup stage with
// capabilities in the new namespaces and the egress stage on the host.
// Here the sandbox appends a byte to it, which comes back, and the next
// session's stages run sbx itself, saying why.
func TestSandboxBinInCodeDirNotRun(t *testing.T) {
	small := os.Getenv(local.EnvSandboxBin)
	w := newWorld(t)
	bin := filepath.Join(w.code, "tools", local.SandboxBinName)
	os.Mkdir(filepath.Dir(bin), 0o755)
	copyFile(t, small, bin, 0o755)
	orig, _ := os.ReadFile(bin)
	env := []string{local.EnvSandboxBin + "=" + bin}
	if r := w.sbxEnv(t, w.code, env, "exec", "--", "printf x >> tools/"+local.SandboxBinName); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if now, _ := os.ReadFile(bin); !bytes.Equal(now, append(orig, 'x')) {
		t.Fatalf("the sandbox's change to %s did not come back (%d bytes, was %d): the test shows nothing", bin, len(now), len(orig))
	}
	out := runKept(t, w, sbxBin, "incode", env)
	want, _ := filepath.EvalSymlinks(sbxBin)
	if ini, wk := initExe(t, w, "incode"); ini != want || wk != want {
		t.Errorf("the init runs %q and its worker %q, want sbx itself %q; sbx said:\n%s", ini, wk, want, out)
	}
	if e := egressExe(t, w, "incode"); e != want {
		t.Errorf("the egress proxy runs %q, want sbx itself %q", e, want)
	}
	if !strings.Contains(out, "which the sandbox can write") {
		t.Errorf("no debug line says why:\n%s", out)
	}
}
