package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sbx-sh/sbx/cluster"
)

func testCLI() (*cli, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &cli{stdout: &out, stderr: &errb, log: slog.New(slog.DiscardHandler)}, &out, &errb
}

func TestPoolRender(t *testing.T) {
	c, out, errb := testCLI()
	code := c.pool(context.Background(), []string{"render", "--tenant", "acme", "--image", "busybox:1", "--replicas", "0", "--runtime-class", "gvisor", "--cache-mount", "/cache"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, s := range []string{"kind: SandboxTemplate", "kind: SandboxWarmPool", `name: "sbx-acme"`, "replicas: 0", `runtimeClassName: "gvisor"`, `path: "/var/lib/sbx/cache/acme"`} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q", s)
		}
	}
	c, _, errb = testCLI()
	if code := c.pool(context.Background(), []string{"render", "--tenant", "Bad_Tenant", "--image", "x"}); code != exitSbxError || !strings.Contains(errb.String(), "--tenant") {
		t.Errorf("bad tenant: exit %d %s", code, errb)
	}
	c, _, _ = testCLI()
	if code := c.pool(context.Background(), nil); code != exitUsage {
		t.Errorf("no sub-command: exit %d", code)
	}
}

func TestDoctorClusterBadKubeconfig(t *testing.T) {
	t.Setenv(cluster.EnvKubeconfig, "/nonexistent/sbx-kubeconfig")
	c, out, _ := testCLI()
	if code := c.doctor(context.Background(), []string{"--backend", "cluster"}); code != 1 {
		t.Errorf("exit %d", code)
	}
	if !strings.Contains(out.String(), "FAIL kubeconfig: kubeconfig /nonexistent/sbx-kubeconfig is not usable") || !strings.Contains(out.String(), "fix: set AGENT_SANDBOX_KUBECONFIG") {
		t.Errorf("output:\n%s", out)
	}
}

func TestDoctorLocal(t *testing.T) {
	c, out, _ := testCLI()
	c.doctor(context.Background(), []string{"--backend", "local"})
	for _, s := range []string{"user namespaces", "cgroups", "host git"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}
