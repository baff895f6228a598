//go:build e2e

package clustere2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/sandbox"
)

// benchRuntimes measures, in one run, a pool under gVisor against the same
// pool under runc: the memory of an idle warm pod and what the helper adds,
// the claim to first exec, and the per-command cost. Both pools are rendered
// by cluster.RenderPool like the e2e pool (the helper preinstalled), with 2
// replicas each.
func benchRuntimes(t *testing.T, md *strings.Builder) {
	ctx := context.Background()
	type runtimeRes struct {
		name                     string
		idlePod, podWithHelper   []int64 // PSS of the pod's processes, kB
		helperRSS                []int64 // VmRSS of the helper as the pod sees it, kB
		claimExec, sbxExec, rawE []time.Duration
	}
	rc, err := clientcmd.BuildConfigFromFlags("", saConfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(rc)
	var results []runtimeRes
	for _, rt := range []struct{ name, class string }{{"gVisor (RuntimeClass gvisor, runsc systrap)", "gvisor"}, {"runc", ""}} {
		tenant := "bench" + map[string]string{"gvisor": "gvisor", "": "runc"}[rt.class]
		pool, err := cluster.RenderPool(cluster.PoolOptions{Tenant: tenant, Image: image, Replicas: 2, Memory: "256Mi", CPU: "1",
			RuntimeClass: rt.class, APIVersion: extVersion, HelperImage: helperImage})
		if err != nil {
			t.Fatal(err)
		}
		if err := apply(ctx, pool); err != nil {
			t.Fatal(err)
		}
		name := cluster.PoolName(tenant)
		cfg := saCfg(t)
		cfg.Pool = name
		p := cluster.New(cfg, nil)
		res := runtimeRes{name: rt.name}
		for i := 0; i < 5; i++ {
			waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			if err := waitPoolReady(waitCtx, name, 2); err != nil {
				t.Fatal(err)
			}
			cancel()
			start := time.Now()
			sbi, err := p.Claim(ctx, sandbox.Spec{Name: fmt.Sprintf("%s-%d", tenant, i), StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			sb := sbi.(*cluster.Sandbox)
			// the pod is idle and warm until the first command starts the helper
			before := podPSS(t, ctx, sb.Pod())
			if _, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
			res.claimExec = append(res.claimExec, time.Since(start))
			res.idlePod = append(res.idlePod, before)
			res.podWithHelper = append(res.podWithHelper, podPSS(t, ctx, sb.Pod()))
			_, out, _ := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", `grep -E '^(Name|VmRSS):' /proc/$PPID/status`}})
			if !strings.Contains(out, "Name:\tsbx") {
				t.Fatalf("the command's parent is not the helper: %q", out)
			}
			f := strings.Fields(out[strings.Index(out, "VmRSS:"):])
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			res.helperRSS = append(res.helperRSS, kb)
			if i == 0 {
				for j := 0; j < 30; j++ {
					s := time.Now()
					if r, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}, Stdout: io.Discard, Stderr: io.Discard}); err != nil || r.ExitCode != 0 {
						t.Fatalf("exec: %v %+v", err, r)
					}
					res.sbxExec = append(res.sbxExec, time.Since(s))
					s = time.Now()
					if err := rawExec(ctx, rc, kube, sb.Pod(), []string{"true"}); err != nil {
						t.Fatal(err)
					}
					res.rawE = append(res.rawE, time.Since(s))
				}
			}
			sb.Release(ctx)
		}
		results = append(results, res)
	}
	fmt.Fprintf(md, "### gVisor against runc (the same pool, rendered by `cluster.RenderPool` with the helper preinstalled, RuntimeClass gvisor or none; 5 claims each, 30 commands each)\n\n")
	md.WriteString("Memory is the PSS of every process in the pod's memory cgroup (`/proc/<pid>/smaps_rollup`; under gVisor the sandbox kernel, its gofer and the systrap stubs, the application memory included; the per-pod containerd shim is outside the cgroup and not counted, for both runtimes). The helper's own RSS is `VmRSS` of the helper as seen in the pod.\n\n")
	md.WriteString("| runtime | idle warm pod (PSS) | pod with the helper running | helper VmRSS in the pod | claim -> first exec | Sandbox.Exec `true` | raw client-go exec `true` |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s |\n", r.name, mib(r.idlePod), mib(r.podWithHelper), mib(r.helperRSS),
			ms(median(r.claimExec)), ms(median(r.sbxExec)), ms(median(r.rawE)))
	}
	if len(results) == 2 {
		fmt.Fprintf(md, "\ngVisor / runc (medians): claim -> first exec **%.2fx**, Sandbox.Exec **%.2fx**, raw exec **%.2fx**.\n\n",
			ratio(results[0].claimExec, results[1].claimExec), ratio(results[0].sbxExec, results[1].sbxExec), ratio(results[0].rawE, results[1].rawE))
	}
}

// mib is the median of kB values, in MiB.
func mib(kb []int64) string {
	d := make([]time.Duration, len(kb))
	for i, v := range kb {
		d[i] = time.Duration(v)
	}
	return fmt.Sprintf("%.1f MiB", float64(median(d))/1024)
}

// podPSS is the summed PSS (kB) of every process in the pod's memory cgroup
// (cgroup v1, the kubelet's cgroupfs driver, as up.sh configures it).
func podPSS(t *testing.T, ctx context.Context, pod string) int64 {
	t.Helper()
	p, err := admin.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/memory/kubepods*/*/pod" + string(p.UID))
	more, _ := filepath.Glob("/sys/fs/cgroup/memory/kubepods*/pod" + string(p.UID))
	dirs = append(dirs, more...)
	if len(dirs) != 1 {
		t.Fatalf("pod %s: memory cgroup of uid %s: found %v", pod, p.UID, dirs)
	}
	var total int64
	n := 0
	filepath.WalkDir(dirs[0], func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, pid := range strings.Fields(string(b)) {
			s, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
			if err != nil {
				continue // exited meanwhile
			}
			for _, l := range strings.Split(string(s), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "Pss:" {
					v, _ := strconv.ParseInt(f[1], 10, 64)
					total += v
					n++
				}
			}
		}
		return nil
	})
	if n == 0 {
		t.Fatalf("pod %s: no process in its memory cgroup %s", pod, dirs[0])
	}
	return total
}
