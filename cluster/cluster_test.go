package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	discoveryfake "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	sbv1alpha1 "sigs.k8s.io/agent-sandbox/api/v1alpha1"
	sbv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	corefake "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned/fake"
	extfake "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned/fake"
	extv1alpha1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/sbx-sh/sbx/sandbox"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name, in string
		same     bool
	}{
		{"plain key stays", "demo", true},
		{"dots and dashes stay", "my.session-1_x", true},
		{"63 chars stay", long[:63], true},
		{"64 chars hashed", long, false},
		{"slash hashed", "proj/feature", false},
		{"space hashed", "a b", false},
		{"leading dash hashed", "-x", false},
		{"empty hashed", "", false},
		{"unicode hashed", "café", false},
	}
	for _, c := range cases {
		got := LabelValue(c.in)
		if (got == c.in) != c.same {
			t.Errorf("%s: LabelValue(%q) = %q", c.name, c.in, got)
		}
		if !c.same && (len(got) != 42 || !strings.HasPrefix(got, "h-")) {
			t.Errorf("%s: hashed value %q is not h-<40 hex>", c.name, got)
		}
		if LabelValue(c.in) != got {
			t.Errorf("%s: not deterministic", c.name)
		}
	}
	if g := claimGenerateName("John.Doe@EXAMPLE"); g != "sbx-john-doeexample-" {
		t.Errorf("claimGenerateName = %q", g)
	}
	if g := claimGenerateName("@@@"); g != "sbx-" {
		t.Errorf("claimGenerateName(@@@) = %q", g)
	}
}

func TestChooseVersion(t *testing.T) {
	cases := []struct {
		name   string
		served []string
		want   string
		ok     bool
	}{
		{"v0.1.1 controller", []string{"v1alpha1"}, "v1alpha1", true},
		{"newer controller", []string{"v1beta1"}, "v1beta1", true},
		{"both served: prefer v1beta1", []string{"v1alpha1", "v1beta1"}, "v1beta1", true},
		{"unknown only", []string{"v2"}, "", false},
		{"nothing served", nil, "", false},
	}
	for _, c := range cases {
		got, ok := chooseVersion(c.served)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %q %v", c.name, got, ok)
		}
	}
}

// The environment is read by package config (its cluster.* keys, tested
// there and in internal/app); zero fields take the defaults.
func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Namespace != "sbx" || c.ClaimTimeout != 180*time.Second || c.IdleTTL != 1800*time.Second || c.Persistent || c.Owner == "" {
		t.Errorf("defaults: %+v", c)
	}
	c = Config{Namespace: "team", ClaimTimeout: 30 * time.Second, IdleTTL: 2 * time.Minute, Kubeconfig: "/x"}.withDefaults()
	if c.Namespace != "team" || c.ClaimTimeout != 30*time.Second || c.IdleTTL != 2*time.Minute || c.KubeconfigPath() != "/x" {
		t.Errorf("set fields: %+v", c)
	}
	// an unreadable kubeconfig names itself
	_, err := Config{Kubeconfig: filepath.Join(t.TempDir(), "missing.yaml")}.RESTConfig()
	var ke *KubeconfigError
	if !errors.As(err, &ke) || !strings.Contains(err.Error(), "missing.yaml") || !strings.Contains(err.Error(), EnvKubeconfig) {
		t.Errorf("missing kubeconfig: %v", err)
	}
}

func TestAPIErrorTranslation(t *testing.T) {
	gr := schema.GroupResource{Group: GroupExtensions, Resource: "sandboxclaims"}
	forbidden := apierrors.NewForbidden(gr, "", errors.New(`User "system:serviceaccount:sbx:sbx" cannot create resource "sandboxclaims"`))
	cases := []struct {
		name   string
		err    error
		check  func(error) bool
		substr []string
	}{
		{"forbidden names verb and resource", forbidden, func(e error) bool { var f *ForbiddenError; return errors.As(e, &f) },
			[]string{"RBAC forbids create on sandboxclaims.extensions.agents.x-k8s.io", `namespace "sbx"`, "rbac.yaml"}},
		{"unauthorized", apierrors.NewUnauthorized("no"), func(e error) bool { return errors.Is(e, ErrUnauthorized) }, []string{"credentials"}},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, func(e error) bool { var u *UnreachableError; return errors.As(e, &u) },
			[]string{"https://127.0.0.1:6443 is unreachable"}},
		{"collection 404 means CRDs missing", apierrors.NewNotFound(gr, ""), func(e error) bool { return errors.Is(e, ErrCRDsMissing) }, []string{"install agent-sandbox"}},
		{"other errors wrapped with context", errors.New("boom"), func(e error) bool { return true }, []string{"create sandboxclaims.extensions.agents.x-k8s.io: boom"}},
	}
	for _, c := range cases {
		got := apiError(c.err, "https://127.0.0.1:6443", "create", "sandboxclaims."+GroupExtensions, "sbx")
		if !c.check(got) {
			t.Errorf("%s: wrong type: %T %v", c.name, got, got)
		}
		for _, s := range c.substr {
			if !strings.Contains(got.Error(), s) {
				t.Errorf("%s: %q lacks %q", c.name, got, s)
			}
		}
	}
}

func decodeDocs(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("bad YAML: %v\n%s", err, doc)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func TestRenderPool(t *testing.T) {
	b, err := RenderPool(PoolOptions{Tenant: "acme", Image: "registry.example/dev:1", CacheMount: "/cache", Replicas: 3, RuntimeClass: "gvisor", Memory: "2Gi"},
		"--tenant", "acme", "evil\nkind: Secret")
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeDocs(t, b)
	if len(docs) != 2 || docs[0]["kind"] != "SandboxTemplate" || docs[1]["kind"] != "SandboxWarmPool" {
		t.Fatalf("docs: %v", docs)
	}
	tmpl := &unstructured.Unstructured{Object: docs[0]}
	pool := &unstructured.Unstructured{Object: docs[1]}
	str := func(u *unstructured.Unstructured, f ...string) any {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, f...)
		return v
	}
	ps := []string{"spec", "podTemplate", "spec"}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"template name", tmpl.GetName(), "sbx-acme"},
		{"namespace", tmpl.GetNamespace(), "sbx"},
		{"runtime class", str(tmpl, append(ps, "runtimeClassName")...), "gvisor"},
		{"no SA token", str(tmpl, append(ps, "automountServiceAccountToken")...), false},
		{"no service links", str(tmpl, append(ps, "enableServiceLinks")...), false},
		{"non-root", str(tmpl, append(ps, "securityContext", "runAsNonRoot")...), true},
		{"uid", str(tmpl, append(ps, "securityContext", "runAsUser")...), float64(1000)},
		{"cache hostPath under tenant dir", fmt.Sprint(str(tmpl, append(ps, "volumes")...)), "[map[emptyDir:map[] name:tmp] map[emptyDir:map[] name:home] map[hostPath:map[path:/var/lib/sbx/cache/acme type:Directory] name:cache]]"},
		{"pool replicas", str(pool, "spec", "replicas"), float64(3)},
		{"pool template ref", str(pool, "spec", "sandboxTemplateRef", "name"), "sbx-acme"},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	ctrs, _, _ := unstructured.NestedSlice(tmpl.Object, append(ps, "containers")...)
	c0 := ctrs[0].(map[string]any)
	if lim := fmt.Sprint(c0["resources"]); !strings.Contains(lim, "memory:2Gi") {
		t.Errorf("limits: %s", lim)
	}
	if !strings.Contains(string(b), "# Warm pool for tenant acme, rendered by: sbx pool render --tenant acme evilkind: Secret\n") {
		t.Errorf("header comment not sanitized:\n%s", b)
	}
	// no cache, no runtime class: neither field appears
	b, _ = RenderPool(PoolOptions{Tenant: "t", Image: "busybox"})
	if strings.Contains(string(b), "hostPath") || strings.Contains(string(b), "runtimeClassName") {
		t.Errorf("unexpected fields:\n%s", b)
	}
	bad := []PoolOptions{
		{Tenant: "Acme", Image: "x"}, {Tenant: "a_b", Image: "x"}, {Tenant: "t"}, {Tenant: "t", Image: "a b"},
		{Tenant: "t", Image: "x", Memory: "lots"}, {Tenant: "t", Image: "x", CacheMount: "rel/path"}, {Tenant: "t", Image: "x", Replicas: -1},
		{Tenant: "t", Image: "x", CacheMount: "/"}, {Tenant: "t", Image: "x", RuntimeClass: "Bad Name"},
	}
	for _, o := range bad {
		if _, err := RenderPool(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// The Role in deploy/rbac.yaml grants exactly RequiredAccess.
func TestRBACMatchesRequiredAccess(t *testing.T) {
	b, err := os.ReadFile("deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var granted []string
	kinds := map[string]bool{}
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
	for {
		var u unstructured.Unstructured
		if err := d.Decode(&u.Object); err != nil {
			break
		}
		kinds[u.GetKind()] = true
		if u.GetKind() == "ClusterRole" || u.GetKind() == "ClusterRoleBinding" {
			t.Errorf("rbac.yaml must not grant anything cluster-wide: %s", u.GetKind())
		}
		if u.GetKind() != "Role" {
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						granted = append(granted, v+" "+res+"."+g)
					}
				}
			}
		}
	}
	var want []string
	for _, a := range RequiredAccess {
		r := a.Resource
		if a.Subresource != "" {
			r += "/" + a.Subresource
		}
		want = append(want, a.Verb+" "+r+"."+a.Group)
	}
	slices.Sort(granted)
	slices.Sort(want)
	if !slices.Equal(granted, want) {
		t.Errorf("rbac.yaml grants\n%v\nRequiredAccess is\n%v", granted, want)
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		if !kinds[k] {
			t.Errorf("rbac.yaml lacks a %s", k)
		}
	}
}

// fakeCluster is a fake API server with agent-sandbox's resources (its
// own typed fake clientsets) and a tiny controller that makes claims Ready.
type fakeCluster struct {
	kube *kubefake.Clientset
	ext  *extfake.Clientset
	core *corefake.Clientset
	disc *discoveryfake.FakeDiscovery
	// version is the extensions group's served version.
	version string
	// podLimits are the resource limits of the pods the controller makes.
	podLimits corev1.ResourceList
}

// newFakeCluster serves the extensions group in extVersion. objs are
// v1alpha1 pools and templates; each is stored in v1beta1 too, as the API
// server converts between served versions.
func newFakeCluster(t *testing.T, extVersion string, objs ...runtime.Object) *fakeCluster {
	kube := kubefake.NewSimpleClientset()
	disc := kube.Discovery().(*discoveryfake.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{
		{GroupVersion: GroupExtensions + "/" + extVersion, APIResources: []metav1.APIResource{{Name: "sandboxclaims", Namespaced: true, Kind: "SandboxClaim"}}},
		{GroupVersion: GroupCore + "/v1alpha1", APIResources: []metav1.APIResource{{Name: "sandboxes", Namespaced: true, Kind: "Sandbox"}}},
	}
	var all []runtime.Object
	for _, o := range objs {
		all = append(all, o)
		switch o := o.(type) {
		case *extv1alpha1.SandboxWarmPool:
			r := o.Spec.Replicas
			all = append(all, &extv1beta1.SandboxWarmPool{ObjectMeta: o.ObjectMeta,
				Spec:   extv1beta1.SandboxWarmPoolSpec{Replicas: &r, TemplateRef: extv1beta1.SandboxTemplateRef{Name: o.Spec.TemplateRef.Name}},
				Status: extv1beta1.SandboxWarmPoolStatus{ReadyReplicas: o.Status.ReadyReplicas}})
		case *extv1alpha1.SandboxTemplate:
			b := &extv1beta1.SandboxTemplate{ObjectMeta: o.ObjectMeta}
			b.Spec.PodTemplate = sbv1beta1.PodTemplate{Spec: o.Spec.PodTemplate.Spec,
				ObjectMeta: sbv1beta1.PodMetadata{Labels: o.Spec.PodTemplate.ObjectMeta.Labels, Annotations: o.Spec.PodTemplate.ObjectMeta.Annotations}}
			all = append(all, b)
		}
	}
	ext := extfake.NewSimpleClientset(all...)
	n := 0
	ext.PrependReactor("create", "sandboxclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject())
		if err != nil {
			return true, nil, err
		}
		if u.GetName() == "" {
			n++
			u.SetName(fmt.Sprintf("%s%05d", u.GetGenerateName(), n))
			u.SetUID(types.UID(fmt.Sprintf("uid-%d", n)))
			u.SetCreationTimestamp(metav1.Now())
			// The tracker keeps versions of its own and leaves the
			// objects' empty; a watch from "1" is one from before every
			// object, as a real create's version is for the claim's watch.
			u.SetResourceVersion("1")
		}
		return false, nil, nil
	})
	return &fakeCluster{kube: kube, ext: ext, core: corefake.NewSimpleClientset(), disc: disc, version: extVersion}
}

func pool(name, tmpl string, ready int32) *extv1alpha1.SandboxWarmPool {
	return &extv1alpha1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "sbx"},
		Spec:       extv1alpha1.SandboxWarmPoolSpec{Replicas: 2, TemplateRef: extv1alpha1.SandboxTemplateRef{Name: tmpl}},
		Status:     extv1alpha1.SandboxWarmPoolStatus{ReadyReplicas: ready},
	}
}

// claim reads a claim in the served version.
func (f *fakeCluster) claim(ctx context.Context, name string) (*claimView, error) {
	return newExtAPI(f.version, f.ext).claimGet(ctx, "sbx", name)
}

// claims lists the claims in the served version.
func (f *fakeCluster) claims(ctx context.Context) []claimView {
	l, _ := newExtAPI(f.version, f.ext).claimList(ctx, "sbx", metav1.ListOptions{})
	return l
}

// controller makes the first unready claim Ready, creates its Sandbox
// (annotated with a pool pod's name) and that pod.
func (f *fakeCluster) controller(t *testing.T, ctx context.Context) {
	ready := []metav1.Condition{{Type: "Ready", Status: "True", Reason: "DependenciesReady"}}
	makePod := func(c metav1.Object) {
		podName := "pool-" + c.GetName()
		f.kube.CoreV1().Pods("sbx").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: "sbx", Labels: map[string]string{labelClaimUID: string(c.GetUID())}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Resources: corev1.ResourceRequirements{Limits: f.podLimits}}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}, metav1.CreateOptions{})
		f.core.AgentsV1alpha1().Sandboxes("sbx").Create(ctx, &sbv1alpha1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Name: c.GetName(), Namespace: "sbx", Annotations: map[string]string{annotPodName: podName}},
		}, metav1.CreateOptions{})
	}
	go func() {
		for ctx.Err() == nil {
			if f.version == "v1alpha1" {
				claims := f.ext.ExtensionsV1alpha1().SandboxClaims("sbx")
				list, err := claims.List(ctx, metav1.ListOptions{})
				for i := 0; err == nil && i < len(list.Items); i++ {
					c := &list.Items[i]
					if st, _, _, _ := readyCondition(claimV1alpha1(c)); st != "True" {
						makePod(c)
						c.Status.Conditions, c.Status.SandboxStatus.Name = ready, c.Name
						claims.Update(ctx, c, metav1.UpdateOptions{})
					}
				}
			} else {
				claims := f.ext.ExtensionsV1beta1().SandboxClaims("sbx")
				list, err := claims.List(ctx, metav1.ListOptions{})
				for i := 0; err == nil && i < len(list.Items); i++ {
					c := &list.Items[i]
					if st, _, _, _ := readyCondition(claimV1beta1(c)); st != "True" {
						makePod(c)
						c.Status.Conditions, c.Status.SandboxStatus.Name = ready, c.Name
						claims.Update(ctx, c, metav1.UpdateOptions{})
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// Claim, renew, attach, list and release, in both API versions: a
// v1alpha1 claim names the pool's template, a v1beta1 claim the pool.
func TestClaimAttachRelease(t *testing.T) {
	for _, v := range knownVersions {
		t.Run(v, func(t *testing.T) { testClaimAttachRelease(t, v) })
	}
}

func testClaimAttachRelease(t *testing.T, version string) {
	f := newFakeCluster(t, version, pool("p", "busybox", 2))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.controller(t, ctx)
	cfg := Config{Pool: "p", Owner: "alice", IdleTTL: time.Hour, ClaimTimeout: 10 * time.Second}
	p := NewForClients(cfg, nil, f.kube, f.ext, f.core, f.disc, nil)
	dir := t.TempDir()
	var progress []string
	before := time.Now()
	sb, err := p.Claim(ctx, sandbox.Spec{Name: "proj/feature x", StateDir: dir, Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	if !strings.HasPrefix(s.Pod(), "pool-sbx-alice-") || s.container != "sandbox" {
		t.Errorf("pod %q container %q", s.Pod(), s.container)
	}
	if len(progress) == 0 {
		t.Error("no progress reported")
	}
	c, err := f.claim(ctx, s.Claim())
	if err != nil {
		t.Fatal(err)
	}
	l := c.GetLabels()
	if l[LabelOwner] != "alice" || l[LabelSession] != LabelValue("proj/feature x") || l[LabelManagedBy] != "sbx" || c.GetAnnotations()[AnnotSessionKey] != "proj/feature x" {
		t.Errorf("labels %v annotations %v", l, c.GetAnnotations())
	}
	ref := map[string][2]string{"v1alpha1": {"busybox", ""}, "v1beta1": {"", "p"}}[version]
	pol, shut := c.ShutdownPolicy, c.ShutdownTime
	if c.TemplateRef != ref[0] || c.WarmPoolRef != ref[1] || pol != "Delete" || shut.Before(before.Add(59*time.Minute-time.Second)) || shut.After(time.Now().Add(61*time.Minute)) {
		t.Errorf("spec: template %q pool %q (want %q) policy %q shutdown %v", c.TemplateRef, c.WarmPoolRef, ref, pol, shut)
	}

	// Renew moves shutdownTime
	s.mu.Lock()
	s.shutdown = time.Now().Add(time.Minute) // less than half the TTL left
	s.lastRenew = time.Time{}
	s.mu.Unlock()
	if err := s.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	c, _ = f.claim(ctx, s.Claim())
	if t2 := c.ShutdownTime; t2.Before(time.Now().Add(59 * time.Minute)) {
		t.Errorf("renewed shutdownTime %s", t2)
	}

	// A new provider (restarted sbx) attaches through the state dir.
	p2 := NewForClients(cfg, nil, f.kube, f.ext, f.core, f.disc, nil)
	sb2, err := p2.Attach(ctx, sandbox.Spec{Name: "proj/feature x", StateDir: dir})
	if err != nil || sb2.(*Sandbox).Claim() != s.Claim() {
		t.Fatalf("attach: %v", err)
	}
	// ... and, persistent, by label without the state dir
	pcfg := cfg
	pcfg.Persistent = true
	p3 := NewForClients(pcfg, nil, f.kube, f.ext, f.core, f.disc, nil)
	sb3, err := p3.Attach(ctx, sandbox.Spec{Name: "proj/feature x", StateDir: t.TempDir()})
	if err != nil || sb3.(*Sandbox).Claim() != s.Claim() {
		t.Fatalf("persistent attach: %v", err)
	}
	if _, err := p2.Attach(ctx, sandbox.Spec{Name: "other", StateDir: t.TempDir()}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("attach unknown: %v", err)
	}
	infos, err := p.List(ctx)
	if err != nil || len(infos) != 1 || infos[0].Session != "proj/feature x" || !infos[0].Ready {
		t.Errorf("list: %+v %v", infos, err)
	}

	if err := sb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Release(ctx); err != nil {
		t.Errorf("second release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left: %v", err)
	}
	if _, err := f.claim(ctx, s.Claim()); !apierrors.IsNotFound(err) {
		t.Errorf("claim not deleted: %v", err)
	}
	// the state of a claim that is gone is stale
	writeState(dir, s.state())
	var stale *sandbox.StaleError
	if _, err := p2.Attach(ctx, sandbox.Spec{Name: "proj/feature x", StateDir: dir}); !errors.As(err, &stale) || !strings.Contains(err.Error(), "no longer exists") {
		t.Errorf("attach after release: %v", err)
	}
}

func TestClaimTimeoutSaysWhy(t *testing.T) {
	f := newFakeCluster(t, "v1alpha1", pool("empty", "busybox", 0))
	p := NewForClients(Config{Pool: "empty", Owner: "bob", ClaimTimeout: 300 * time.Millisecond}, nil, f.kube, f.ext, f.core, f.disc, nil)
	_, err := p.Claim(context.Background(), sandbox.Spec{Name: "s", StateDir: t.TempDir()})
	var te *ClaimTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("want ClaimTimeoutError, got %v", err)
	}
	for _, s := range []string{`pool "empty"`, `namespace "sbx"`, "0 of 2 sandboxes ready", "conditions: none reported", "deleted it"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q lacks %q", err, s)
		}
	}
	list, _ := f.ext.ExtensionsV1alpha1().SandboxClaims("sbx").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Errorf("claim not deleted after timeout: %d left", len(list.Items))
	}
}

func TestClaimErrors(t *testing.T) {
	f := newFakeCluster(t, "v1alpha1")
	p := NewForClients(Config{Pool: "nope", Owner: "bob"}, nil, f.kube, f.ext, f.core, f.disc, nil)
	_, err := p.Claim(context.Background(), sandbox.Spec{Name: "s"})
	var pe *PoolNotFoundError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `SandboxWarmPool "nope" not found in namespace "sbx"`) {
		t.Errorf("missing pool: %v", err)
	}
	p = NewForClients(Config{Owner: "bob"}, nil, f.kube, f.ext, f.core, f.disc, nil)
	if _, err := p.Claim(context.Background(), sandbox.Spec{Name: "s"}); !errors.As(err, &pe) || !strings.Contains(err.Error(), EnvPool) {
		t.Errorf("no pool configured: %v", err)
	}
	f.disc.Resources = nil
	p = NewForClients(Config{Pool: "p"}, nil, f.kube, f.ext, f.core, f.disc, nil)
	if _, err := p.Claim(context.Background(), sandbox.Spec{Name: "s"}); !errors.Is(err, ErrCRDsMissing) {
		t.Errorf("no CRDs: %v", err)
	}
	// RBAC denial on create names the verb and resource
	f = newFakeCluster(t, "v1alpha1", pool("p", "busybox", 1))
	f.ext.PrependReactor("create", "sandboxclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: GroupExtensions, Resource: "sandboxclaims"}, "", errors.New("denied"))
	})
	p = NewForClients(Config{Pool: "p"}, nil, f.kube, f.ext, f.core, f.disc, nil)
	var fe *ForbiddenError
	if _, err := p.Claim(context.Background(), sandbox.Spec{Name: "s"}); !errors.As(err, &fe) || fe.Verb != "create" {
		t.Errorf("forbidden: %v", err)
	}
}

func TestClaimSpecV1beta1(t *testing.T) {
	f := newFakeCluster(t, "v1beta1")
	a, err := newAPI(nil, f.kube, f.ext, f.core, f.disc)
	if err != nil {
		t.Fatal(err)
	}
	if a.ext != "v1beta1" {
		t.Fatalf("chose %s", a.ext)
	}
	obj, err := claimObject(a.ext, metav1.ObjectMeta{Name: "c"}, &poolView{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Template: "busybox"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*extv1beta1.SandboxClaim)
	if !ok || c.Spec.WarmPoolRef.Name != "p" {
		t.Fatalf("v1beta1 claim: %#v", obj)
	}
	// On the wire it names the pool, and no template (v1beta1 has no such field).
	b, _ := json.Marshal(c)
	if !strings.Contains(string(b), `"warmPoolRef":{"name":"p"}`) || strings.Contains(string(b), "sandboxTemplateRef") || !strings.Contains(string(b), `"apiVersion":"extensions.agents.x-k8s.io/v1beta1"`) {
		t.Errorf("v1beta1 claim on the wire: %s", b)
	}
	// A v1alpha1 claim needs the pool's template.
	if _, err := claimObject("v1alpha1", metav1.ObjectMeta{Name: "c"}, &poolView{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "sbx"}}, time.Now()); err == nil || !strings.Contains(err.Error(), "no spec.sandboxTemplateRef.name") {
		t.Errorf("v1alpha1 claim for a pool without a template: %v", err)
	}
}
