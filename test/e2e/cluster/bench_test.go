//go:build e2e

package clustere2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/internal/testtree"
	"github.com/sbx-sh/sbx/sandbox"
)

// TestBenchmarks measures the cluster backend against baselines in the same
// run and writes a Markdown section to $SBX_E2E_BENCH_OUT (run.sh sets it
// with BENCH=1). The plain test run leaves it out (-skip); run on its own
// without that variable, it fails and says how to run it.
func TestBenchmarks(t *testing.T) {
	outPath := os.Getenv("SBX_E2E_BENCH_OUT")
	if outPath == "" {
		t.Fatal("set SBX_E2E_BENCH_OUT (BENCH=1 test/e2e/cluster/run.sh) to run the benchmarks")
	}
	ctx := context.Background()
	cfg := saCfg(t)
	p := cluster.New(cfg, nil)
	var md strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&md, "## Cluster backend (lab cluster)\n\nMeasured %s on %s by `BENCH=1 test/e2e/cluster/run.sh` "+
		"(Kubernetes v1.37.2 + agent-sandbox %s, %s served, on this machine; the e2e pool's pods from lab.local/busybox:v1 under %s; "+
		"the least-privilege service account's kubeconfig). Medians; all rows of a table come from one run.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, os.Getenv("SBX_E2E_AGENT_SANDBOX"), extVersion, runtimeName())

	// SBX_E2E_BENCH_SECTIONS=claim,exec,sync,runtimes runs some sections only
	// (all by default), for a quick measurement while working on one.
	want := func(sec string) bool {
		v := os.Getenv("SBX_E2E_BENCH_SECTIONS")
		return v == "" || slices.Contains(strings.Split(v, ","), sec)
	}
	if want("claim") {
		benchClaim(t, &md)
	}
	if want("exec") || want("sync") {
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		waitPoolReady(waitCtx, poolName, 2)
		cancel()
		sb := claim(t, p, "bench-exec")
		if r, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}}); err != nil || r.ExitCode != 0 {
			t.Fatalf("exec: %v %+v", err, r)
		}
		if want("exec") {
			benchExec(t, sb, &md)
		}
		if want("sync") {
			benchSync(t, sb, &md)
		}
	}
	if want("runtimes") {
		benchRuntimes(t, &md)
	}
	// What follows keepMarker in the file (notes, earlier measurements) is
	// kept; the sections above it are this run's.
	if old, err := os.ReadFile(outPath); err == nil {
		if i := strings.Index(string(old), keepMarker); i >= 0 {
			md.WriteString("\n" + string(old[i:]))
		}
	}
	if err := os.WriteFile(outPath, []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
}

// benchClaim: claim to first exec, against create + watch until Ready, for
// the e2e pool (the helper preinstalled by an init container) and the same
// pool without the preinstall (the helper uploaded by the first exec),
// interleaved; and one raw pods/exec of `true`, the least an exec-based
// first command can add to the floor.
func benchClaim(t *testing.T, md *strings.Builder) {
	ctx := context.Background()
	// the preinstalled rows must not have uploaded: the provider's log says
	p, plog := providerLog(t, poolName)
	const nClaims = 5
	plainTenant := "plain"
	plain, err := cluster.RenderPool(cluster.PoolOptions{Tenant: plainTenant, Image: image, Replicas: 2, CacheMount: "/cache",
		CacheRoot: cacheRoot, Memory: "256Mi", CPU: "1", RuntimeClass: os.Getenv("SBX_E2E_RUNTIME_CLASS"), APIVersion: extVersion})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(cacheRoot, plainTenant), 0o750)
	os.Chown(filepath.Join(cacheRoot, plainTenant), 1000, 1000)
	if err := apply(ctx, plain); err != nil {
		t.Fatal(err)
	}
	plainCfg := saCfg(t)
	plainCfg.Pool = cluster.PoolName(plainTenant)
	pPlain := cluster.New(plainCfg, nil)
	rc, _ := clientcmd.BuildConfigFromFlags("", saConfig)
	kube := kubernetes.NewForConfigOrDie(rc)
	ready := func(pool string) {
		waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := waitPoolReady(waitCtx, pool, 2); err != nil {
			t.Fatal(err)
		}
	}
	var claimOnly []time.Duration // Provider.Claim's return, preinstalled pool
	claimExec := func(p *cluster.Provider, name string, only *[]time.Duration) (time.Duration, string) {
		start := time.Now()
		sb, err := p.Claim(ctx, sandbox.Spec{Name: name, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if only != nil {
			*only = append(*only, time.Since(start))
		}
		if _, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		sb.Release(ctx)
		return d, sb.(*cluster.Sandbox).Pod()
	}
	var pre, up, floor, raw []time.Duration
	for i := 0; i < nClaims; i++ {
		ready(poolName)
		d, pod := claimExec(p, fmt.Sprintf("bench-%d", i), &claimOnly)
		pre = append(pre, d)
		ready(plainCfg.Pool)
		d, _ = claimExec(pPlain, fmt.Sprintf("bench-plain-%d", i), nil)
		up = append(up, d)
		ready(poolName)
		floor = append(floor, rawClaimReady(t, ctx))
		// a raw exec into a warm pod of the pool (the one just released is
		// going away: take a ready one)
		pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "sbx.dev/tenant=" + tenant})
		if err != nil {
			t.Fatal(err)
		}
		for _, pp := range pods.Items {
			if pp.Name != pod && pp.DeletionTimestamp == nil && pp.Status.Phase == corev1.PodRunning {
				s := time.Now()
				if err := rawExec(ctx, rc, kube, pp.Name, []string{"true"}); err != nil {
					t.Fatal(err)
				}
				raw = append(raw, time.Since(s))
				break
			}
		}
	}
	if strings.Contains(plog.String(), "uploaded the in-pod helper") {
		t.Fatalf("a claim of the preinstalled pool uploaded the helper; the provider logged:\n%s", plog.String())
	}
	fmt.Fprintf(md, "### Claim from a warm pool (%d claims each, interleaved, pools of 2 ready)\n\n| path | median | min | max |\n|---|---|---|---|\n", nClaims)
	row(md, "floor: create SandboxClaim, watch until Ready (raw client-go)", floor)
	row(md, "one raw client-go pods/exec of `true` into a warm pod (WebSocket)", raw)
	row(md, "sbx, helper preinstalled: Provider.Claim alone (create, watch, find the pod)", claimOnly)
	row(md, "sbx, helper preinstalled (`--helper-image`): Provider.Claim + first Exec of `true`", pre)
	row(md, "sbx, helper uploaded (no `--helper-image`): Provider.Claim + first Exec of `true`", up)
	fmt.Fprintf(md, "\nsbx / floor: preinstalled **%.2fx**, uploaded **%.2fx** (goal <= 1.5x); floor + one raw exec (medians added, %s) / floor: **%.2fx**\n\n",
		ratio(pre, floor), ratio(up, floor), ms(median(floor)+median(raw)), float64(median(floor)+median(raw))/float64(median(floor)))
}

// benchExec: per-command overhead in one claimed pod.
func benchExec(t *testing.T, sb *cluster.Sandbox, md *strings.Builder) {
	ctx := context.Background()
	const nExec = 40
	var sbxExec, raw, kubectl []time.Duration
	rc, err := clientcmd.BuildConfigFromFlags("", saConfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(rc)
	kubectlBin := os.Getenv("SBX_E2E_KUBECTL")
	// The first command (the caller's) started the session's exec of the
	// helper (and uploaded it); that is the claim's cost, measured above.
	for i := 0; i < nExec; i++ {
		start := time.Now()
		if r, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"true"}, Stdout: io.Discard, Stderr: io.Discard}); err != nil || r.ExitCode != 0 {
			t.Fatalf("exec: %v %+v", err, r)
		}
		sbxExec = append(sbxExec, time.Since(start))
		start = time.Now()
		if err := rawExec(ctx, rc, kube, sb.Pod(), []string{"true"}); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, time.Since(start))
		if kubectlBin != "" && i < 20 {
			start = time.Now()
			if out, err := exec.Command(kubectlBin, "--kubeconfig", saConfig, "-n", ns, "exec", sb.Pod(), "--", "true").CombinedOutput(); err != nil {
				t.Fatalf("kubectl exec: %v %s", err, out)
			}
			kubectl = append(kubectl, time.Since(start))
		}
	}
	// The CLI: one sbx process per command, reattaching to a kept session.
	w := newWorld(t)
	if out, errs, code := w.sbx("exec", "--keep", "--session", "bench-cli", "--", "true"); code != 0 {
		t.Fatalf("sbx exec: %d %s %s", code, out, errs)
	}
	var cli []time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		if out, errs, code := w.sbx("exec", "--keep", "--session", "bench-cli", "--", "true"); code != 0 {
			t.Fatalf("sbx exec: %d %s %s", code, out, errs)
		}
		cli = append(cli, time.Since(start))
	}
	fmt.Fprintf(md, "### Per command: `true` in a claimed pod (%d runs each, interleaved; CLI and kubectl 20)\n\n| path | median | min | max |\n|---|---|---|---|\n", nExec)
	row(md, "raw client-go exec of `true` (WebSocket, no wrapper)", raw)
	row(md, "sbx engine: Sandbox.Exec of `true` (a stream on the session's exec of the helper)", sbxExec)
	row(md, "`sbx exec --keep -- true`: one sbx process per command (reattach, sync round trip, mux start, command)", cli)
	if len(kubectl) > 0 {
		row(md, "`kubectl exec` process per command", kubectl)
	}
	fmt.Fprintf(md, "\nsbx engine / raw client-go: **%.2fx** (goal <= 1.2x); `sbx exec` process / raw client-go: **%.2fx**", ratio(sbxExec, raw), ratio(cli, raw))
	if len(kubectl) > 0 {
		fmt.Fprintf(md, "; kubectl / sbx engine: **%.2fx** (goal >= 3x); kubectl / `sbx exec` process: **%.2fx**", ratio(kubectl, sbxExec), ratio(kubectl, cli))
	}
	md.WriteString("\n\n")
}

// benchSync: a 10k-file tree through tar over one exec, both ways, against the
// sync through sbx exec (initial push into a new session; a command
// that makes 10k files, pulled back).
func benchSync(t *testing.T, sb *cluster.Sandbox, md *strings.Builder) {
	ctx := context.Background()
	src := t.TempDir()
	makeTree(src, 10000)
	var tarIn, tarOut, syncIn, syncOut, cpAlone []time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		tc := exec.Command("tar", "-C", src, "-cf", "-", ".")
		pipe, _ := tc.StdoutPipe()
		tc.Start()
		r, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"sh", "-c", "rm -rf /tmp/tree && mkdir /tmp/tree && tar -xf - -C /tmp/tree"}, Stdin: pipe})
		tc.Wait()
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("tar in: %v %+v", err, r)
		}
		tarIn = append(tarIn, time.Since(start))
		dst := t.TempDir()
		start = time.Now()
		xc := exec.Command("tar", "-C", dst, "-xf", "-")
		wc, _ := xc.StdinPipe()
		xc.Start()
		r, err = sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"tar", "-cf", "-", "-C", "/tmp/tree", "."}, Stdout: wc})
		wc.Close()
		xc.Wait()
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("tar out: %v %+v", err, r)
		}
		tarOut = append(tarOut, time.Since(start))
		// The command of the pull row alone, in the pod, no sync.
		start = time.Now()
		r, err = sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"sh", "-c", fmt.Sprintf("cp -a /tmp/tree /tmp/tree-cp%d", i)}})
		// Under gVisor the root file system's writes are pod memory (its
		// overlay's file store): copies kept round after round got the
		// 256Mi pod OOM-killed in the third round. Each round removes its own.
		sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"rm", "-rf", fmt.Sprintf("/tmp/tree-cp%d", i)}})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("cp alone: %v %+v", err, r)
		}
		cpAlone = append(cpAlone, time.Since(start))

		// sbx: a session is claimed (and its helper started) on a code
		// dir with a small repository; then the 10k files appear on the
		// host, and the next command pushes them all.
		sw := newWorld(t)
		session := fmt.Sprintf("bench-sync-%d", i)
		if out, errs, code := sw.sbx("exec", "--keep", "--session", session, "--", "true"); code != 0 {
			t.Fatalf("claim: %d %s %s", code, out, errs)
		}
		makeTree(filepath.Join(sw.code, "tree"), 10000)
		start = time.Now()
		if out, errs, code := sw.sbx("exec", "--keep", "--session", session, "--", "true"); code != 0 {
			t.Fatalf("sync in: %d %s %s", code, out, errs)
		}
		syncIn = append(syncIn, time.Since(start))
		start = time.Now()
		if out, errs, code := sw.sbx("exec", "--keep", "--session", session, "--", "cp -a tree tree2"); code != 0 {
			t.Fatalf("sync out: %d %s %s", code, out, errs)
		}
		syncOut = append(syncOut, time.Since(start))
		if n := testtree.RegularFiles(filepath.Join(sw.code, "tree2")); n != 10000 {
			t.Fatalf("%d of 10000 files came back", n)
		}
		sw.sbx("release", "--session", session)
	}
	_, out, _ := run(t, sb, &sandbox.Cmd{Argv: []string{"sh", "-c", "find /tmp/tree -type f | wc -l"}})
	fmt.Fprintf(md, "### 10,000-file tree (%s files arrived by tar), 3 runs\n\n| direction | median | min | max |\n|---|---|---|---|\n", strings.TrimSpace(out))
	row(md, "host -> pod: `tar c` on the host piped into Exec `tar x`", tarIn)
	row(md, "host -> pod: `sbx exec -- true` after the 10k files appeared on the host (all pushed)", syncIn)
	row(md, "pod -> host: Exec `tar c` piped into `tar x` on the host", tarOut)
	row(md, "pod -> host: `sbx exec -- cp -a tree tree2` (10k new files pulled)", syncOut)
	row(md, "the same `cp -a` alone in the pod (Sandbox.Exec, no sync)", cpAlone)
	pull := median(syncOut) - median(cpAlone)
	fmt.Fprintf(md, "\nsbx / tar: in **%.2fx** the time (an sbx process, the session, the host's scan and the push); "+
		"out **%.2fx** counting the pull alone (%s: the `sbx exec` row less the command's own time).\n",
		ratio(syncIn, tarIn), float64(pull)/float64(median(tarOut)), ms(pull))
}

// keepMarker starts the part of docs/benchmarks-cluster.md a bench run keeps.
const keepMarker = "<!-- kept by BENCH=1 run.sh: notes and earlier measurements -->"

func runtimeName() string {
	if c := os.Getenv("SBX_E2E_RUNTIME_CLASS"); c != "" {
		return "RuntimeClass " + c
	}
	return "runc"
}

func makeTree(root string, n int) {
	for i := 0; i < n; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%03d", i/100))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ratio(a, b []time.Duration) float64 { return float64(median(a)) / float64(median(b)) }

func row(md *strings.Builder, name string, d []time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	fmt.Fprintf(md, "| %s | %s | %s | %s |\n", name, ms(median(d)), ms(s[0]), ms(s[len(s)-1]))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// rawClaimReady is the floor of a claim: create a SandboxClaim and watch it
// until Ready, nothing else. It deletes the claim afterwards.
func rawClaimReady(t *testing.T, ctx context.Context) time.Duration {
	rc, _ := clientcmd.BuildConfigFromFlags("", saConfig)
	dyn := dynamicFor(t, rc)
	pool, err := dyn.Resource(poolsGVR).Namespace(ns).Get(ctx, poolName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{"lifecycle": map[string]any{"shutdownTime": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339), "shutdownPolicy": "Delete"}}
	if extVersion == "v1alpha1" {
		tmpl, _, _ := unstructured.NestedString(pool.Object, "spec", "sandboxTemplateRef", "name")
		spec["sandboxTemplateRef"] = map[string]any{"name": tmpl}
	} else {
		spec["warmPoolRef"] = map[string]any{"name": pool.GetName()}
	}
	start := time.Now()
	c, err := dyn.Resource(claimsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cluster.GroupExtensions + "/" + extVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"generateName": "floor-", "namespace": ns},
		"spec":     spec,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dyn.Resource(claimsGVR).Namespace(ns).Delete(context.Background(), c.GetName(), metav1.DeleteOptions{})
	w, err := dyn.Resource(claimsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", c.GetName()).String(), ResourceVersion: c.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cd := range conds {
			if m, _ := cd.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				return time.Since(start)
			}
		}
	}
	t.Fatal("watch ended before the claim was Ready")
	return 0
}

// rawExec is one plain client-go exec, WebSocket with SPDY fallback, as a
// tool without sbx's wrapper would do it.
func rawExec(ctx context.Context, rc *restConfig, kube kubernetes.Interface, pod string, argv []string) error {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "sandbox", Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, _ := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	var out bytes.Buffer
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
}

type restConfig = rest.Config

func dynamicFor(t *testing.T, rc *rest.Config) dynamic.Interface {
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
