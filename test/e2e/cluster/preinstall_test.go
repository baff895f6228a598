//go:build e2e

package clustere2e

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/sandbox"
)

// providerLog is a Provider whose log (debug and up) the test reads.
func providerLog(t *testing.T, pool string) (*cluster.Provider, *lockedBuilder) {
	t.Helper()
	var log lockedBuilder
	cfg := saCfg(t)
	cfg.Pool = pool
	return cluster.New(cfg, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))), &log
}

// podHelperHash is the SHA-256 of the helper file in the pod, read by a
// command the helper runs.
func podHelperHash(t *testing.T, sb *cluster.Sandbox) string {
	t.Helper()
	r, out, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"sha256sum", sandbox.HelperPath}})
	if r.ExitCode != 0 {
		t.Fatalf("sha256sum %s: exit %d: %s %s", sandbox.HelperPath, r.ExitCode, out, errs)
	}
	return strings.Fields(out)[0]
}

// The e2e pool preinstalls the helper (an init container from the helper
// image, cluster.RenderPool's HelperImage): a claim starts it without an
// upload, and what runs in the pod is this very build.
func TestPreinstalledHelper(t *testing.T) {
	p, log := providerLog(t, poolName)
	sb := claim(t, p, "preinstalled")
	if r, out, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"echo", "hi"}}); r.ExitCode != 0 || out != "hi\n" {
		t.Fatalf("first command: exit %d, %q %q", r.ExitCode, out, errs)
	}
	if got := podHelperHash(t, sb); got != helperSHA {
		t.Errorf("the pod's helper has hash %s, want the preinstalled build's %s", got, helperSHA)
	}
	l := log.String()
	if strings.Contains(l, "uploaded the in-pod helper") || !strings.Contains(l, "started the preinstalled helper") {
		t.Errorf("want the preinstalled helper started without an upload; the provider logged:\n%s", l)
	}
}

// A pool whose helper image holds another build (an older sbx's, or
// anything else at the helper path): sbx does not use it. The greeting's
// hash differs, sbx says so, uploads its own build, and that is what runs.
func TestStalePreinstalledHelperReplaced(t *testing.T) {
	p, log := providerLog(t, stalePool)
	sb := claim(t, p, "stale")
	if r, out, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"echo", "hi"}}); r.ExitCode != 0 || out != "hi\n" {
		t.Fatalf("first command: exit %d, %q %q", r.ExitCode, out, errs)
	}
	if got := podHelperHash(t, sb); got != helperSHA {
		t.Errorf("the pod runs a helper of hash %s, want sbx's own %s (the preinstalled one is another build)", got, helperSHA)
	}
	l := log.String()
	if !strings.Contains(l, "not this sbx's build") || !strings.Contains(l, "uploaded the in-pod helper") {
		t.Errorf("want a warning and an upload over the stale helper; the provider logged:\n%s", l)
	}
}

// The sandbox replaces the helper with another build and breaks the
// session's mux (the command kills it): the next command's start finds a
// helper whose hash is not sbx's and uploads sbx's own before using it.
func TestReplacedHelperNotTrusted(t *testing.T) {
	p, log := providerLog(t, poolName)
	sb := claim(t, p, "replaced")
	if r, _, errs := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c",
		`cp ` + sandbox.HelperPath + ` /tmp/x && echo planted >> /tmp/x && mv /tmp/x ` + sandbox.HelperPath + ` && sha256sum ` + sandbox.HelperPath}}); r.ExitCode != 0 {
		t.Fatalf("plant: exit %d %s", r.ExitCode, errs)
	}
	// Kill the mux (the parent of this command's helper); this command's
	// own result is lost with it.
	sb.Exec(t.Context(), &sandbox.Cmd{Argv: []string{"sh", "-c", `kill -9 $(cut -d' ' -f4 /proc/$PPID/stat)`}})
	if got := podHelperHash(t, sb); got != helperSHA {
		t.Errorf("after the sandbox replaced the helper, the pod runs hash %s, want sbx's own %s", got, helperSHA)
	}
	if l := log.String(); !strings.Contains(l, "uploaded the in-pod helper") {
		t.Errorf("want an upload over the planted helper; the provider logged:\n%s", l)
	}
}
