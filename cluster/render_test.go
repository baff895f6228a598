package cluster

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sbx-sh/sbx/sandbox"
)

// podSpec renders o and decodes the template's pod spec as Kubernetes would.
func podSpec(t *testing.T, o PoolOptions) corev1.PodSpec {
	t.Helper()
	b, err := RenderPool(o)
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeDocs(t, b)
	spec, ok, _ := unstructured.NestedMap(docs[0], "spec", "podTemplate", "spec")
	if !ok {
		t.Fatalf("no spec.podTemplate.spec in %v", docs[0])
	}
	var ps corev1.PodSpec
	j, _ := yaml.Marshal(spec)
	if err := yaml.UnmarshalStrict(j, &ps); err != nil {
		t.Fatalf("the template's pod spec is not a PodSpec: %v", err)
	}
	return ps
}

// The rendered pod holds what issue 15 asks of a sandbox pod: seccomp
// RuntimeDefault, no privilege escalation, every capability dropped, no
// service-account token, and a read-only root with /tmp and the home as
// emptyDirs.
func TestRenderPoolHardening(t *testing.T) {
	ps := podSpec(t, PoolOptions{Tenant: "t", Image: "busybox", WritableDirs: []string{"/work"}})
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("the pod mounts a service-account token")
	}
	if ps.SecurityContext == nil || ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers", len(ps.Containers))
	}
	c := ps.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop ALL and no add", sc.Capabilities)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("the root file system is writable")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("container seccompProfile is not RuntimeDefault")
	}
	empty := map[string]bool{}
	for _, v := range ps.Volumes {
		if v.EmptyDir != nil {
			empty[v.Name] = true
		}
	}
	var writable []string
	for _, m := range c.VolumeMounts {
		if empty[m.Name] && !m.ReadOnly {
			writable = append(writable, m.MountPath)
		}
	}
	if want := []string{"/tmp", sandbox.Home, "/work"}; !slices.Equal(writable, want) {
		t.Errorf("writable emptyDirs at %q, want %q", writable, want)
	}

	// --writable-root: the image writes where it likes; no emptyDirs.
	ps = podSpec(t, PoolOptions{Tenant: "t", Image: "busybox", WritableRoot: true})
	if sc := ps.Containers[0].SecurityContext; sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		t.Error("WritableRoot: the root is read-only")
	}
	if len(ps.Volumes) != 0 {
		t.Errorf("WritableRoot: volumes %+v", ps.Volumes)
	}
	for _, o := range []PoolOptions{
		{Tenant: "t", Image: "x", WritableDirs: []string{"/tmp"}},
		{Tenant: "t", Image: "x", WritableDirs: []string{"rel"}},
		{Tenant: "t", Image: "x", WritableDirs: []string{"/w", "/w"}},
		{Tenant: "t", Image: "x", WritableRoot: true, WritableDirs: []string{"/w"}},
	} {
		if _, err := RenderPool(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
