package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1alpha1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"

	"github.com/sbx-sh/sbx/inpod"
)

func sandboxTemplate(name, runtimeClass string) *extv1alpha1.SandboxTemplate {
	t := &extv1alpha1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "sbx"}}
	t.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"sbx.dev/tenant": "t"}
	t.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "sandbox", Image: "busybox"}}
	if runtimeClass != "" {
		t.Spec.PodTemplate.Spec.RuntimeClassName = &runtimeClass
	}
	return t
}

// sbx doctor names the pool template's RuntimeClass and says whether its
// pods run under gVisor: the RuntimeClass's handler and the pods' own
// runtimeClassName.
func TestRuntimeCheck(t *testing.T) {
	gvisor := "gvisor"
	for _, c := range []struct {
		name     string
		tmplRC   string
		handler  string // "" : no RuntimeClass object
		podRC    *string
		ok       bool
		contains string
	}{
		{"gVisor", "gvisor", "runsc", &gvisor, true, "handler runsc: gVisor; 1 of the namespace's sbx pods use it"},
		{"no runtime class", "", "", nil, false, "not gVisor"},
		{"runc handler", "gvisor", "runc", &gvisor, false, "handler runc: not gVisor"},
		{"missing RuntimeClass", "gvisor", "", &gvisor, false, "does not exist"},
		{"a pod under runc", "gvisor", "runsc", nil, false, "1 do not"},
	} {
		for _, v := range knownVersions {
			t.Run(c.name+" "+v, func(t *testing.T) {
				f := newFakeCluster(t, v, pool("p", "tmpl", 1), sandboxTemplate("tmpl", c.tmplRC))
				ctx := context.Background()
				if c.handler != "" {
					f.kube.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: c.tmplRC}, Handler: c.handler}, metav1.CreateOptions{})
				}
				f.kube.CoreV1().Pods("sbx").Create(ctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: "pool-pod", Namespace: "sbx", Labels: map[string]string{"sbx.dev/tenant": "t"}},
					Spec:       corev1.PodSpec{RuntimeClassName: c.podRC},
				}, metav1.CreateOptions{})
				a, err := newAPI(nil, f.kube, f.ext, f.core, f.disc)
				if err != nil {
					t.Fatal(err)
				}
				got := runtimeCheck(ctx, a, f.kube, Config{Pool: "p", Namespace: "sbx"})
				if got.OK != c.ok || !strings.Contains(got.Detail, c.contains) || (!got.OK && got.Fix == "") {
					t.Errorf("got %+v; want OK %v and a detail with %q (and a fix when not OK)", got, c.ok, c.contains)
				}
			})
		}
	}
}

// sbx doctor says how the pool's pods get the helper: preinstalled (from
// which image), or uploaded by each claim; and it fails only when there is
// neither a preinstall nor a helper for sbx to upload.
func TestHelperCheck(t *testing.T) {
	pre := sandboxTemplate("tmpl", "")
	pre.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{AnnotHelper: HelperPreinstalled}
	pre.Spec.PodTemplate.Spec.InitContainers = []corev1.Container{{Name: helperInit, Image: "reg/sbx-inpod:1", Command: []string{"/usr/local/bin/sbx-inpod", "__inpod", "install"}}}
	annotated := sandboxTemplate("tmpl", "")
	annotated.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{AnnotHelper: HelperPreinstalled}
	for _, c := range []struct {
		name     string
		tmpl     *extv1alpha1.SandboxTemplate
		hash     string
		ok       bool
		contains []string
	}{
		{"init container", pre, "0123456789abcdef", true, []string{"preinstalled by template tmpl's init container sbx-helper from image reg/sbx-inpod:1", "sha256 0123456789ab"}},
		{"annotation only", annotated, "0123456789abcdef", true, []string{"says its pods have the helper", "uploads its own when it differs"}},
		{"uploaded", sandboxTemplate("tmpl", ""), "0123456789abcdef", true, []string{"uploaded into each new pod", "--helper-image"}},
		{"preinstalled, no helper of sbx's own", pre, "", true, []string{"preinstalled", "no helper of its own", inpod.Version}},
		{"neither", sandboxTemplate("tmpl", ""), "", false, []string{"has none to upload"}},
	} {
		for _, v := range knownVersions {
			t.Run(c.name+" "+v, func(t *testing.T) {
				f := newFakeCluster(t, v, pool("p", "tmpl", 1), c.tmpl)
				a, err := newAPI(nil, f.kube, f.ext, f.core, f.disc)
				if err != nil {
					t.Fatal(err)
				}
				got := helperCheck(context.Background(), a, Config{Pool: "p", Namespace: "sbx"}, c.hash)
				if got.OK != c.ok || (!got.OK && got.Fix == "") {
					t.Errorf("got %+v; want OK %v (and a fix when not OK)", got, c.ok)
				}
				for _, s := range c.contains {
					if !strings.Contains(got.Detail, s) {
						t.Errorf("detail %q lacks %q", got.Detail, s)
					}
				}
			})
		}
	}
}
