package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sbx-sh/sbx/sandbox"
)

// PoolOptions are the inputs of RenderPool (sbx pool render).
type PoolOptions struct {
	Tenant    string // required; a DNS label
	Image     string // required
	Namespace string // default "sbx"
	Replicas  int    // warm sandboxes; 0 is a valid (empty) pool, the CLI's default is 2
	// RuntimeClass is the pods' runtimeClassName ("gvisor" in production);
	// empty means the node's default runtime.
	RuntimeClass string
	Memory       string // memory limit, default 4Gi
	CPU          string // CPU limit, default 2
	// CacheMount, when set, mounts the tenant's per-node package cache there
	// (a hostPath <CacheRoot>/<tenant>, which the node script creates).
	CacheMount string
	CacheRoot  string // default /var/lib/sbx/cache
	UID        int64  // the non-root user the sandbox runs as, default 1000
	// WritableRoot leaves the container's root file system writable, for
	// an image that writes outside /tmp, the home and WritableDirs. By
	// default it is read-only, and /tmp and sandbox.Home are emptyDirs.
	WritableRoot bool
	// WritableDirs are more emptyDirs of a read-only pod: where the users'
	// code dirs appear in the pod (at their host paths, e.g. /home or
	// /work).
	WritableDirs []string
	// APIVersion of the extensions group, default v1alpha1.
	APIVersion string
	// DenyEgress adds a NetworkPolicy that lets the tenant's pods reach
	// only the cluster's DNS and EgressCIDRs (where the operator runs the
	// allowlist proxy, docs/cluster.md); EgressCIDRs alone implies it.
	DenyEgress  bool
	EgressCIDRs []string
	// HelperImage, when set (or HelperPath), adds an init container that
	// copies sbx's in-pod helper from that image into the pod's /tmp, so a
	// claim starts the helper at once instead of uploading it first; empty
	// with HelperPath set means Image itself. sbx checks the hash of the
	// helper that answers and uploads its own build when it differs.
	HelperImage string
	// HelperPath is where a static sbx-inpod is in HelperImage, default
	// DefaultHelperPath.
	HelperPath string
}

// DefaultHelperPath is where RenderPool's init container finds sbx-inpod in
// the helper image unless told otherwise.
const DefaultHelperPath = "/usr/local/bin/sbx-inpod"

// AnnotHelper on a pod says how its helper got there: HelperPreinstalled
// means an init container (or the image) put it at sandbox.HelperPath, and
// sbx starts it without an upload first. It is a hint only: what answers
// there is checked by hash either way.
const (
	AnnotHelper        = "sbx.dev/helper"
	HelperPreinstalled = "preinstalled"
)

// preinstall reports whether the pool copies the helper in at pod start.
func (o PoolOptions) preinstall() bool { return o.HelperImage != "" || o.HelperPath != "" }

// PoolName is the name of the SandboxTemplate and SandboxWarmPool that
// RenderPool writes for a tenant.
func PoolName(tenant string) string { return "sbx-" + tenant }

func (o PoolOptions) withDefaults() PoolOptions {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Memory == "" {
		o.Memory = "4Gi"
	}
	if o.CPU == "" {
		o.CPU = "2"
	}
	if o.CacheRoot == "" {
		o.CacheRoot = "/var/lib/sbx/cache"
	}
	if o.UID == 0 {
		o.UID = 1000
	}
	if o.APIVersion == "" {
		o.APIVersion = "v1alpha1"
	}
	if o.preinstall() {
		if o.HelperImage == "" {
			o.HelperImage = o.Image
		}
		if o.HelperPath == "" {
			o.HelperPath = DefaultHelperPath
		}
	}
	return o
}

func (o PoolOptions) validate() error {
	if errs := validation.IsDNS1123Label(o.Tenant); len(errs) > 0 || len(o.Tenant) > 50 {
		return fmt.Errorf("--tenant %q: want a DNS label of at most 50 characters (lowercase letters, digits, '-')", o.Tenant)
	}
	if o.Image == "" || strings.ContainsAny(o.Image, " \t\n\"'") {
		return fmt.Errorf("--image %q: want an image reference", o.Image)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.Replicas < 0 || o.Replicas > 1000 {
		return fmt.Errorf("--replicas %d: want 0..1000", o.Replicas)
	}
	if o.RuntimeClass != "" && len(validation.IsDNS1123Subdomain(o.RuntimeClass)) > 0 {
		return fmt.Errorf("--runtime-class %q: not a valid name", o.RuntimeClass)
	}
	for flag, v := range map[string]string{"--memory": o.Memory, "--cpu": o.CPU} {
		if q, err := resource.ParseQuantity(v); err != nil || q.Sign() <= 0 {
			return fmt.Errorf("%s %q: want a positive quantity like 4Gi or 2", flag, v)
		}
	}
	seen := map[string]bool{"/tmp": true, sandbox.Home: true}
	for _, d := range o.WritableDirs {
		if !path.IsAbs(d) || path.Clean(d) != d || d == "/" {
			return fmt.Errorf("--writable-dir %q: want a clean absolute path other than /", d)
		}
		if seen[d] || d == o.CacheMount {
			return fmt.Errorf("--writable-dir %q: mounted twice (/tmp and %s are always writable)", d, sandbox.Home)
		}
		seen[d] = true
	}
	if o.WritableRoot && len(o.WritableDirs) > 0 {
		return errors.New("--writable-dir needs a read-only root (it is for what --writable-root would allow anyway)")
	}
	for flag, v := range map[string]string{"--cache-mount": o.CacheMount, "--cache-root": o.CacheRoot} {
		if v != "" && (!path.IsAbs(v) || path.Clean(v) != v || v == "/") {
			return fmt.Errorf("%s %q: want a clean absolute path other than /", flag, v)
		}
	}
	for _, c := range o.EgressCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			return fmt.Errorf("--egress-cidr %q: want a CIDR such as 10.0.5.0/24 or 10.0.5.7/32", c)
		}
	}
	if o.preinstall() {
		if strings.ContainsAny(o.HelperImage, " \t\n\"'") {
			return fmt.Errorf("--helper-image %q: want an image reference", o.HelperImage)
		}
		if !path.IsAbs(o.HelperPath) || path.Clean(o.HelperPath) != o.HelperPath || strings.ContainsAny(o.HelperPath, "\"\n") {
			return fmt.Errorf("--helper-path %q: want the clean absolute path of sbx-inpod in the helper image", o.HelperPath)
		}
		if o.WritableRoot {
			return errors.New("--helper-image needs the read-only root (the default): the init container puts the helper into the pod's /tmp emptyDir, which --writable-root does not have")
		}
	}
	if o.UID <= 0 {
		return fmt.Errorf("uid %d: the sandbox must run as a non-root user", o.UID)
	}
	return nil
}

var poolTemplate = template.Must(template.New("pool").Funcs(template.FuncMap{"q": quote}).Parse(`{{define "hardening"}}
        securityContext:
          allowPrivilegeEscalation: false
          privileged: false
          capabilities:
            drop: ["ALL"]
          seccompProfile:
            type: RuntimeDefault
{{- if not .WritableRoot}}
          # Only the mounted volumes are writable: /tmp (the helper, the
          # stubs, sbx's run dir), the home, and the code dirs' roots.
          readOnlyRootFilesystem: true
{{- end}}
{{- end}}# Warm pool for tenant {{.Tenant}}, rendered by: sbx pool render{{range .Args}} {{.}}{{end}}
# Apply with: kubectl apply -f - (the namespace must exist; see docs/cluster.md)
apiVersion: extensions.agents.x-k8s.io/{{.APIVersion}}
kind: SandboxTemplate
metadata:
  name: {{q .Name}}
  namespace: {{q .Namespace}}
  labels:
    app.kubernetes.io/managed-by: sbx
    sbx.dev/tenant: {{q .Tenant}}
spec:
  podTemplate:
    metadata:
      labels:
        sbx.dev/tenant: {{q .Tenant}}
{{- if .HelperImage}}
      annotations:
        {{q .AnnotHelper}}: {{q .HelperPreinstalled}}
{{- end}}
    spec:
{{- if .RuntimeClass}}
      runtimeClassName: {{q .RuntimeClass}}
{{- end}}
      # The idle loop exits on SIGTERM at once; do not hold a released sandbox for 30 s.
      terminationGracePeriodSeconds: 5
      # The sandbox gets no API credentials and no environment about services.
      automountServiceAccountToken: false
      enableServiceLinks: false
      securityContext:
        runAsNonRoot: true
        runAsUser: {{.UID}}
        runAsGroup: {{.UID}}
        fsGroup: {{.UID}}
        seccompProfile:
          type: RuntimeDefault
{{- if .HelperImage}}
      # Copies sbx's in-pod helper into /tmp/.sbx before the sandbox starts, so
      # a claim needs no upload; sbx checks its hash and uploads its own when
      # it differs (an older helper image).
      initContainers:
      - name: sbx-helper
        image: {{q .HelperImage}}
        imagePullPolicy: IfNotPresent
        command: [{{q .HelperPath}}, "__inpod", "install"]
{{- template "hardening" .}}
        resources:
          requests:
            cpu: 10m
            memory: 16Mi
          limits:
            cpu: {{q .CPU}}
            memory: 64Mi
        volumeMounts:
        - name: tmp
          mountPath: /tmp
{{- end}}
      containers:
      - name: sandbox
        image: {{q .Image}}
        imagePullPolicy: IfNotPresent
        # Idle until sbx execs into it; exits at once on SIGTERM.
        command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]
        env:
        - name: HOME
          value: /tmp
{{- template "hardening" .}}
        resources:
          requests:
            cpu: 100m
            memory: 128Mi
          limits:
            cpu: {{q .CPU}}
            memory: {{q .Memory}}
{{- if or .CacheMount .Writable}}
        volumeMounts:
{{- range .Writable}}
        - name: {{.Name}}
          mountPath: {{q .Path}}
{{- end}}
{{- if .CacheMount}}
        - name: cache
          mountPath: {{q .CacheMount}}
{{- end}}
      volumes:
{{- range .Writable}}
      - name: {{.Name}}
        emptyDir: {}
{{- end}}
{{- if .CacheMount}}
      # Per-node package cache of this tenant only (created by cluster/deploy/node/cache.sh).
      - name: cache
        hostPath:
          path: {{q .CacheHostPath}}
          type: Directory
{{- end}}
{{- end}}
---
apiVersion: extensions.agents.x-k8s.io/{{.APIVersion}}
kind: SandboxWarmPool
metadata:
  name: {{q .Name}}
  namespace: {{q .Namespace}}
  labels:
    app.kubernetes.io/managed-by: sbx
    sbx.dev/tenant: {{q .Tenant}}
spec:
  replicas: {{.Replicas}}
  sandboxTemplateRef:
    name: {{q .Name}}
{{- if or .DenyEgress .EgressCIDRs}}
---
# The tenant's sandboxes reach the cluster's DNS and the listed CIDRs only
# (the egress allowlist proxy, see docs/cluster.md); no other egress.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{q .Name}}
  namespace: {{q .Namespace}}
  labels:
    app.kubernetes.io/managed-by: sbx
    sbx.dev/tenant: {{q .Tenant}}
spec:
  podSelector:
    matchLabels:
      sbx.dev/tenant: {{q .Tenant}}
  policyTypes: ["Egress"]
  egress:
  - to:
    - namespaceSelector: {}
      podSelector:
        matchLabels:
          k8s-app: kube-dns
    ports:
    - {protocol: UDP, port: 53}
    - {protocol: TCP, port: 53}
{{- if .EgressCIDRs}}
  - to:
{{- range .EgressCIDRs}}
    - ipBlock:
        cidr: {{q .}}
{{- end}}
{{- end}}
{{- end}}
`))

// quote writes s as a double-quoted YAML (JSON) string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// RenderPool returns a SandboxTemplate and a SandboxWarmPool for one tenant
// as YAML. args are echoed in the header comment (the command line).
func RenderPool(o PoolOptions, args ...string) ([]byte, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	type volume struct{ Name, Path string }
	data := struct {
		PoolOptions
		Name, CacheHostPath             string
		Args                            []string
		Writable                        []volume
		AnnotHelper, HelperPreinstalled string
	}{o, PoolName(o.Tenant), path.Join(o.CacheRoot, o.Tenant), nil, nil, AnnotHelper, HelperPreinstalled}
	if !o.WritableRoot {
		data.Writable = []volume{{"tmp", "/tmp"}, {"home", sandbox.Home}}
		for i, d := range o.WritableDirs {
			data.Writable = append(data.Writable, volume{fmt.Sprintf("writable-%d", i), d})
		}
	}
	for _, a := range args { // a comment line must stay one line
		data.Args = append(data.Args, strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return -1
			}
			return r
		}, a))
	}
	var b bytes.Buffer
	if err := poolTemplate.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
