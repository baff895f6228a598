package cluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	extv1alpha1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// What sbx pool render emits is, field for field, agent-sandbox's own
// SandboxTemplate and SandboxWarmPool of the version asked for: each
// document decodes strictly (an unknown or misplaced field is an error)
// into agent-sandbox v0.5.6's Go type, and sbx's typed view of it names the
// template, the replicas and the runtime class rendered.
func TestRenderPoolIsAgentSandboxTypes(t *testing.T) {
	for _, v := range knownVersions {
		t.Run(v, func(t *testing.T) {
			b, err := RenderPool(PoolOptions{Tenant: "acme", Image: "registry.example/dev:1", Replicas: 3, RuntimeClass: "gvisor",
				Memory: "2Gi", APIVersion: v, EgressCIDRs: []string{"10.0.0.0/8"}})
			if err != nil {
				t.Fatal(err)
			}
			var tmpl *templateView
			var pool *poolView
			kinds := 0
			for _, doc := range strings.Split(string(b), "\n---\n") {
				var tm struct{ APIVersion, Kind string }
				if err := yaml.Unmarshal([]byte(doc), &tm); err != nil || tm.Kind == "" {
					continue
				}
				if tm.Kind == "NetworkPolicy" {
					continue // decoded as networking/v1 in render_netpol_test.go
				}
				kinds++
				if tm.APIVersion != GroupExtensions+"/"+v {
					t.Errorf("%s has apiVersion %s, want %s/%s", tm.Kind, tm.APIVersion, GroupExtensions, v)
				}
				var obj runtime.Object
				switch v + "/" + tm.Kind {
				case "v1alpha1/SandboxTemplate":
					obj = &extv1alpha1.SandboxTemplate{}
				case "v1alpha1/SandboxWarmPool":
					obj = &extv1alpha1.SandboxWarmPool{}
				case "v1beta1/SandboxTemplate":
					obj = &extv1beta1.SandboxTemplate{}
				case "v1beta1/SandboxWarmPool":
					obj = &extv1beta1.SandboxWarmPool{}
				default:
					t.Fatalf("unexpected kind %s", tm.Kind)
				}
				if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
					t.Fatalf("%s is not agent-sandbox's %s %s: %v\n%s", tm.Kind, v, tm.Kind, err, doc)
				}
				switch o := obj.(type) {
				case *extv1alpha1.SandboxTemplate:
					tmpl = &templateView{ObjectMeta: o.ObjectMeta, PodLabels: o.Spec.PodTemplate.ObjectMeta.Labels, Pod: o.Spec.PodTemplate.Spec}
				case *extv1beta1.SandboxTemplate:
					tmpl = &templateView{ObjectMeta: o.ObjectMeta, PodLabels: o.Spec.PodTemplate.ObjectMeta.Labels, Pod: o.Spec.PodTemplate.Spec}
				case *extv1alpha1.SandboxWarmPool:
					pool = &poolView{ObjectMeta: o.ObjectMeta, Template: o.Spec.TemplateRef.Name, Replicas: int64(o.Spec.Replicas)}
				case *extv1beta1.SandboxWarmPool:
					pool = &poolView{ObjectMeta: o.ObjectMeta, Template: o.Spec.TemplateRef.Name}
					if o.Spec.Replicas != nil {
						pool.Replicas = int64(*o.Spec.Replicas)
					}
				}
			}
			if kinds != 2 || tmpl == nil || pool == nil {
				t.Fatalf("want a SandboxTemplate and a SandboxWarmPool, got %d documents (template %v, pool %v)", kinds, tmpl != nil, pool != nil)
			}
			if pool.Template != tmpl.Name || pool.Name != PoolName("acme") || pool.Replicas != 3 {
				t.Errorf("pool %s names template %q (rendered %q), replicas %d; want %s, 3", pool.Name, pool.Template, tmpl.Name, pool.Replicas, PoolName("acme"))
			}
			if rc := tmpl.Pod.RuntimeClassName; rc == nil || *rc != "gvisor" || tmpl.PodLabels["sbx.dev/tenant"] != "acme" || len(tmpl.Pod.Containers) != 1 {
				t.Errorf("template: runtime class %v, labels %v, %d containers", rc, tmpl.PodLabels, len(tmpl.Pod.Containers))
			}
		})
	}
}
