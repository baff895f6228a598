package cluster

import (
	"fmt"
	"slices"
	"strings"
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
	if why := hardeningGap(c.SecurityContext); why != "" {
		t.Error(why)
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

// hardeningGap says what a container's securityContext lacks of issue 15's
// hardening ("" when nothing).
func hardeningGap(sc *corev1.SecurityContext) string {
	switch {
	case sc == nil:
		return "no container securityContext"
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		return "allowPrivilegeEscalation is not false"
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		return fmt.Sprintf("capabilities %+v, want drop ALL and no add", sc.Capabilities)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		return "the root file system is writable"
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		return "container seccompProfile is not RuntimeDefault"
	case sc.Privileged != nil && *sc.Privileged:
		return "privileged"
	}
	return ""
}

// --helper-image: an init container, hardened like the sandbox, copies the
// helper into the very emptyDir the sandbox has at /tmp (so it lands at
// sandbox.HelperPath), and the pod says so in its annotation; without the
// option nothing of it is rendered, and it cannot go with a writable root
// (no /tmp emptyDir to carry the helper over).
func TestRenderPoolHelperInit(t *testing.T) {
	o := PoolOptions{Tenant: "t", Image: "busybox", HelperImage: "reg.example/sbx-inpod:1"}
	b, err := RenderPool(o)
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeDocs(t, b)
	ann, _, _ := unstructured.NestedStringMap(docs[0], "spec", "podTemplate", "metadata", "annotations")
	if ann[AnnotHelper] != HelperPreinstalled {
		t.Errorf("pod annotations %v, want %s=%s", ann, AnnotHelper, HelperPreinstalled)
	}
	ps := podSpec(t, o)
	if len(ps.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1", len(ps.InitContainers))
	}
	ic := ps.InitContainers[0]
	if ic.Name != helperInit {
		t.Errorf("init container %q, want %q (sbx doctor looks for that name)", ic.Name, helperInit)
	}
	if ic.Image != o.HelperImage || !slices.Equal(ic.Command, []string{DefaultHelperPath, "__inpod", "install"}) {
		t.Errorf("init container runs %q %q, want %q with %s __inpod install", ic.Image, ic.Command, o.HelperImage, DefaultHelperPath)
	}
	if why := hardeningGap(ic.SecurityContext); why != "" {
		t.Errorf("init container: %s", why)
	}
	if ic.Resources.Limits.Memory().IsZero() || ic.Resources.Limits.Cpu().IsZero() {
		t.Errorf("init container limits %v: want memory and cpu bounded", ic.Resources.Limits)
	}
	mountOf := func(c corev1.Container, path string) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath == path && !m.ReadOnly {
				return m.Name
			}
		}
		return ""
	}
	if v := mountOf(ic, "/tmp"); v == "" || v != mountOf(ps.Containers[0], "/tmp") || len(ic.VolumeMounts) != 1 {
		t.Errorf("init container mounts %+v; want only the sandbox's /tmp volume (%q) at /tmp", ic.VolumeMounts, mountOf(ps.Containers[0], "/tmp"))
	}
	if !strings.HasPrefix(sandbox.HelperPath, "/tmp/") {
		t.Fatalf("sandbox.HelperPath %s is not under /tmp: the init container's copy would not reach it", sandbox.HelperPath)
	}

	// From the pool's own image, at a path of the operator's.
	ps = podSpec(t, PoolOptions{Tenant: "t", Image: "dev:1", HelperPath: "/opt/sbx-inpod"})
	if ic := ps.InitContainers; len(ic) != 1 || ic[0].Image != "dev:1" || ic[0].Command[0] != "/opt/sbx-inpod" {
		t.Errorf("--helper-path alone: init containers %+v, want dev:1 running /opt/sbx-inpod", ic)
	}

	// Without it: no init container, no annotation.
	b, _ = RenderPool(PoolOptions{Tenant: "t", Image: "busybox"})
	if strings.Contains(string(b), "initContainers") || strings.Contains(string(b), AnnotHelper) {
		t.Errorf("a pool without --helper-image renders the preinstall:\n%s", b)
	}

	for _, bad := range []PoolOptions{
		{Tenant: "t", Image: "x", HelperImage: "h", WritableRoot: true},
		{Tenant: "t", Image: "x", HelperImage: "h i"},
		{Tenant: "t", Image: "x", HelperImage: "h", HelperPath: "rel/sbx-inpod"},
		{Tenant: "t", Image: "x", HelperPath: "/a/../b"},
		{Tenant: "t", Image: "x", HelperPath: "/a\"b"},
	} {
		if _, err := RenderPool(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
