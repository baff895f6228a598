//go:build e2e

// Package clustere2e tests the cluster backend end to end against a real
// Kubernetes cluster with agent-sandbox (v0.1.1, or v0.5.6 serving v1beta1
// and v1alpha1, or v0.5.6 serving v1beta1 only), booted by run.sh on this
// machine, its pool under gVisor or runc. Run it only through the harness:
//
//	test/e2e/cluster/run.sh
//
// which builds (or reuses) the cluster under /var/tmp/sbx-cluster-lab, boots
// it, sets SBX_E2E_KUBECONFIG to its admin kubeconfig, runs
// `go test -tags e2e ./test/e2e/cluster/`, and stops every daemon it started.
//
// The admin kubeconfig is used only to set the stage (namespace, rbac.yaml,
// pools from cluster.RenderPool) and to look behind sbx's back; every test of
// sbx itself runs with the least-privilege service account's kubeconfig that
// cluster.ServiceAccountKubeconfig writes.
package clustere2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/internal/testenv"
)

const (
	ns        = "sbx"
	tenant    = "e2e"
	emptyPool = "sbx-empty"
	image     = "lab.local/busybox:v1"
	cacheRoot = "/var/tmp/sbx-cluster-lab/data/cache"
)

var (
	adminRC  *rest.Config
	admin    *kubernetes.Clientset
	adminDyn *dynamic.DynamicClient
	saConfig string // least-privilege kubeconfig path
	poolName = cluster.PoolName(tenant)
	// stalePool preinstalls a helper of another build (helperimage_test.go).
	stalePool = cluster.PoolName("stale")
	// helperSHA is the SHA-256 of the helper the tests upload, the one the
	// e2e pool preinstalls.
	helperSHA string
	// helperImage holds that helper at cluster.DefaultHelperPath.
	helperImage string
	// extVersion is the extensions group's version the tests speak: the one
	// sbx chooses (v1beta1 where served), found by discovery in setup.
	extVersion string
	claimsGVR  schema.GroupVersionResource
	poolsGVR   schema.GroupVersionResource
)

// servedWant is what each pass of run.sh (SBX_E2E_AGENT_SANDBOX) must find
// served of extensions.agents.x-k8s.io, preferred first: a pass that boots
// the wrong controller or CRDs fails in setup instead of testing another API.
var servedWant = map[string][]string{
	"v0.1.1":         {"v1alpha1"},
	"v0.5.6":         {"v1beta1", "v1alpha1"},
	"v0.5.6-v1beta1": {"v1beta1"},
}

// discoverVersions checks what the cluster serves against the pass and sets
// extVersion, claimsGVR and poolsGVR.
func discoverVersions() error {
	pass := os.Getenv("SBX_E2E_AGENT_SANDBOX")
	want, ok := servedWant[pass]
	if !ok {
		return fmt.Errorf("SBX_E2E_AGENT_SANDBOX=%q: want one of v0.1.1, v0.5.6, v0.5.6-v1beta1 (run.sh sets it per pass)", pass)
	}
	groups, err := admin.Discovery().ServerGroups()
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	var served []string
	for _, g := range groups.Groups {
		if g.Name != cluster.GroupExtensions {
			continue
		}
		served = append(served, g.PreferredVersion.Version)
		for _, v := range g.Versions {
			if v.Version != g.PreferredVersion.Version {
				served = append(served, v.Version)
			}
		}
	}
	if strings.Join(served, ",") != strings.Join(want, ",") {
		return fmt.Errorf("pass %s: the cluster serves %s versions %v (preferred first), want %v", pass, cluster.GroupExtensions, served, want)
	}
	extVersion = want[0]
	claimsGVR = schema.GroupVersionResource{Group: cluster.GroupExtensions, Version: extVersion, Resource: "sandboxclaims"}
	poolsGVR = schema.GroupVersionResource{Group: cluster.GroupExtensions, Version: extVersion, Resource: "sandboxwarmpools"}
	return nil
}

func TestMain(m *testing.M) {
	kc := os.Getenv("SBX_E2E_KUBECONFIG")
	if kc == "" {
		fmt.Fprintln(os.Stderr, "SBX_E2E_KUBECONFIG is not set: these tests need the real cluster that test/e2e/cluster/run.sh builds and boots; run that script (as root) instead of go test")
		os.Exit(1)
	}
	// The provider runs in this (dynamically linked) test binary: it
	// uploads a static sbx-inpod built here.
	helperDir, err := os.MkdirTemp("", "sbxe2ehelper")
	if err == nil {
		err = buildHelper(filepath.Join(helperDir, "sbx-inpod"))
	}
	if err == nil {
		err = setup(kc, filepath.Join(helperDir, "sbx-inpod"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e setup: %v\n", err)
		os.RemoveAll(helperDir)
		os.Exit(1)
	}
	os.Setenv(cluster.EnvHelper, filepath.Join(helperDir, "sbx-inpod"))
	code := m.Run()
	os.RemoveAll(helperDir)
	os.Exit(code)
}

func buildHelper(out string) error {
	return testenv.BuildStatic(out, "github.com/sbx-sh/sbx/cmd/sbx-inpod")
}

func setup(kc, helper string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if adminRC, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
		return err
	}
	admin = kubernetes.NewForConfigOrDie(adminRC)
	adminDyn = dynamic.NewForConfigOrDie(adminRC)
	if err := discoverVersions(); err != nil {
		return err
	}
	root := repoRoot()
	rbac, err := os.ReadFile(filepath.Join(root, "cluster/deploy/rbac.yaml"))
	if err != nil {
		return err
	}
	if err := apply(ctx, rbac); err != nil {
		return fmt.Errorf("apply rbac.yaml: %w", err)
	}
	// the tenant's per-node cache dir, as cluster/deploy/node/cache.sh makes it
	dir := filepath.Join(cacheRoot, tenant)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	os.Chown(dir, 1000, 1000)
	// The e2e pool preinstalls the helper the tests upload (an init
	// container copies it from its image); the stale pool one of another
	// build.
	helperRef, sha, err := importHelperImage("sbx-inpod", helper, nil)
	if err != nil {
		return err
	}
	helperSHA, helperImage = sha, helperRef
	staleRef, _, err := importHelperImage("sbx-inpod-stale", helper, []byte("\nanother build\n"))
	if err != nil {
		return err
	}
	pool, err := cluster.RenderPool(cluster.PoolOptions{Tenant: tenant, Image: image, Replicas: 2, CacheMount: "/cache",
		CacheRoot: cacheRoot, Memory: "256Mi", CPU: "1", RuntimeClass: os.Getenv("SBX_E2E_RUNTIME_CLASS"), APIVersion: extVersion,
		HelperImage: helperRef})
	if err != nil {
		return err
	}
	if err := apply(ctx, pool); err != nil {
		return fmt.Errorf("apply rendered pool: %w", err)
	}
	stale, err := cluster.RenderPool(cluster.PoolOptions{Tenant: "stale", Image: image, Replicas: 1, Memory: "256Mi", CPU: "1",
		RuntimeClass: os.Getenv("SBX_E2E_RUNTIME_CLASS"), APIVersion: extVersion, HelperImage: staleRef})
	if err != nil {
		return err
	}
	if err := apply(ctx, stale); err != nil {
		return fmt.Errorf("apply the stale-helper pool: %w", err)
	}
	// A pool that can never serve: no warm pods, and an image that is not on
	// the node (no registry here), so a claim's own pod never starts.
	empty, err := cluster.RenderPool(cluster.PoolOptions{Tenant: "empty", Image: "lab.local/missing:v1", Replicas: 0, APIVersion: extVersion})
	if err != nil {
		return err
	}
	if err := apply(ctx, empty); err != nil {
		return fmt.Errorf("apply empty pool: %w", err)
	}
	if err := waitPoolReady(ctx, poolName, 2); err != nil {
		return err
	}
	if err := checkRuntime(ctx); err != nil {
		return err
	}
	if os.Getenv("SBX_E2E_AGENT_SANDBOX") == "v0.5.6" {
		// v1alpha1 is served by conversion from the stored v1beta1: read the
		// pool through it, so a pass whose webhook does not convert fails.
		gvr := poolsGVR
		gvr.Version = "v1alpha1"
		p, err := adminDyn.Resource(gvr).Namespace(ns).Get(ctx, poolName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read pool %s as v1alpha1 (through the conversion webhook): %w", poolName, err)
		}
		if tmpl, _, _ := unstructured.NestedString(p.Object, "spec", "sandboxTemplateRef", "name"); tmpl != poolName {
			return fmt.Errorf("pool %s read as v1alpha1 has spec.sandboxTemplateRef.name %q, want %q: %v", poolName, tmpl, poolName, p.Object["spec"])
		}
	}
	b, err := cluster.ServiceAccountKubeconfig(ctx, admin, adminRC, cluster.KubeconfigOptions{Namespace: ns, ServiceAccount: "sbx", Duration: 2 * time.Hour})
	if err != nil {
		return fmt.Errorf("write the service account's kubeconfig: %w", err)
	}
	saConfig = filepath.Join(os.TempDir(), fmt.Sprintf("sbx-e2e-sa-%d.kubeconfig", os.Getpid()))
	return os.WriteFile(saConfig, b, 0o600)
}

// checkRuntime checks that the warm pods run under the pass's runtime:
// RuntimeClass gvisor's pods see gVisor's kernel (dmesg is gVisor's own
// boot log), runc's the host's.
func checkRuntime(ctx context.Context) error {
	rcName := os.Getenv("SBX_E2E_RUNTIME_CLASS")
	pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != "Running" {
			continue
		}
		got := ""
		if p.Spec.RuntimeClassName != nil {
			got = *p.Spec.RuntimeClassName
		}
		if got != rcName {
			return fmt.Errorf("pod %s has runtimeClassName %q, want %q", p.Name, got, rcName)
		}
		out, err := exec.CommandContext(ctx, os.Getenv("SBX_E2E_KUBECTL"), "--kubeconfig", os.Getenv("SBX_E2E_KUBECONFIG"),
			"-n", ns, "exec", p.Name, "--", "dmesg").CombinedOutput()
		gvisor := strings.Contains(string(out), "Starting gVisor")
		if (rcName == "gvisor") != gvisor {
			return fmt.Errorf("pod %s (runtimeClassName %q): under gVisor is %v, want %v; dmesg: %v %.300s", p.Name, rcName, gvisor, rcName == "gvisor", err, out)
		}
		return nil
	}
	return fmt.Errorf("no running pod in namespace %s to check the runtime of", ns)
}

func repoRoot() string {
	d, _ := os.Getwd()
	for d != "/" {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && strings.HasSuffix(d, "") {
			if b, _ := os.ReadFile(filepath.Join(d, "go.mod")); strings.Contains(string(b), "module github.com/sbx-sh/sbx\n") {
				return d
			}
		}
		d = filepath.Dir(d)
	}
	panic("repository root not found")
}

// apply server-side-applies every document of a YAML stream as admin.
func apply(ctx context.Context, y []byte) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(admin.Discovery()))
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(y)), 4096)
	for {
		var u unstructured.Unstructured
		if err := d.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
		if u.Object == nil {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = adminDyn.Resource(m.Resource)
		if u.GetNamespace() != "" {
			ri = adminDyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), &u, metav1.ApplyOptions{FieldManager: "sbx-e2e", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
}

func waitPoolReady(ctx context.Context, name string, n int64) error {
	for {
		p, err := adminDyn.Resource(poolsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if r, _, _ := unstructured.NestedInt64(p.Object, "status", "readyReplicas"); r >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			pods, _ := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			var st []string
			for _, p := range pods.Items {
				st = append(st, p.Name+"="+string(p.Status.Phase))
			}
			return fmt.Errorf("pool %s not ready with %d pods: %v (pods: %v)", name, n, ctx.Err(), st)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// saCfg is the backend config of the least-privilege service account.
func saCfg(t *testing.T) cluster.Config {
	t.Helper()
	return cluster.Config{Kubeconfig: saConfig, Namespace: ns, Pool: poolName, Owner: "e2e-" + strings.ToLower(t.Name()),
		ClaimTimeout: 60 * time.Second, IdleTTL: 10 * time.Minute}
}

// claimGone waits until the claim no longer exists.
func claimGone(t *testing.T, name string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		_, err := adminDyn.Resource(claimsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("claim %s still exists after %s", name, within)
}

func getClaim(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	c, err := adminDyn.Resource(claimsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
