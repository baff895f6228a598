package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sbx-sh/sbx/inpod"
)

// Check is one line of sbx doctor: what was checked, whether it passed,
// what was found, and what to do when it failed.
type Check struct {
	Name   string
	OK     bool
	Detail string
	Fix    string
}

// Access is one RBAC permission sbx needs.
type Access struct {
	Verb, Group, Resource, Subresource string
}

func (a Access) String() string {
	r := a.Resource
	if a.Subresource != "" {
		r += "/" + a.Subresource
	}
	if a.Group != "" {
		r += "." + a.Group
	}
	return a.Verb + " " + r
}

// RequiredAccess is every permission sbx needs in its namespace, and
// exactly what cluster/deploy/rbac.yaml grants (a test keeps them equal).
var RequiredAccess = func() []Access {
	var out []Access
	for _, v := range []string{"create", "get", "list", "watch", "patch", "delete"} {
		out = append(out, Access{Verb: v, Group: GroupExtensions, Resource: "sandboxclaims"})
	}
	for _, r := range []struct{ g, r string }{{GroupExtensions, "sandboxwarmpools"}, {GroupExtensions, "sandboxtemplates"}, {GroupCore, "sandboxes"}, {"", "pods"}} {
		for _, v := range []string{"get", "list", "watch"} {
			out = append(out, Access{Verb: v, Group: r.g, Resource: r.r})
		}
	}
	// WebSocket exec is a GET that 1.35+ servers also authorize as create;
	// sbx port's SPDY port-forward is a create (portforward.go).
	return append(out, Access{Verb: "get", Resource: "pods", Subresource: "exec"}, Access{Verb: "create", Resource: "pods", Subresource: "exec"},
		Access{Verb: "create", Resource: "pods", Subresource: "portforward"})
}()

// Doctor checks, in order, everything a first claim needs: the kubeconfig,
// the API server, agent-sandbox's CRDs and served versions, the pool and its
// ready sandboxes, and every permission of RequiredAccess. Checks that
// cannot run because an earlier one failed are not reported.
func Doctor(ctx context.Context, cfg Config) []Check {
	cfg = cfg.withDefaults()
	var out []Check
	add := func(c Check) bool { out = append(out, c); return c.OK }

	rc, err := cfg.RESTConfig()
	if !add(checkResult("kubeconfig", err, func() string {
		p := cfg.KubeconfigPath()
		if p == "" {
			p = "client-go defaults"
		}
		return fmt.Sprintf("%s -> %s", p, rc.Host)
	}, fmt.Sprintf("set %s to a readable kubeconfig (an operator writes one with sbx kubeconfig)", EnvKubeconfig))) {
		return out
	}
	rc.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		add(Check{Name: "kubeconfig", Detail: err.Error(), Fix: "fix the kubeconfig"})
		return out
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		err = apiError(err, rc.Host, "get", "/version", "")
	}
	if !add(checkResult("API server reachable", err, func() string { return rc.Host + " (Kubernetes " + v.GitVersion + ")" },
		"start the cluster, or point the kubeconfig at the right server; check VPN/firewall")) {
		return out
	}
	served, err := discoverServed(kube.Discovery())
	if err == nil {
		if _, ok := chooseVersion(served.Extensions); !ok {
			err = fmt.Errorf("%s serves %v, %s serves %v; sbx speaks %v", GroupExtensions, served.Extensions, GroupCore, served.Core, knownVersions)
		} else if _, ok := chooseVersion(served.Core); !ok {
			err = fmt.Errorf("%s serves %v; sbx speaks %v", GroupCore, served.Core, knownVersions)
		}
	}
	if !add(checkResult("agent-sandbox CRDs", err, func() string {
		return fmt.Sprintf("%s %v, %s %v", GroupExtensions, served.Extensions, GroupCore, served.Core)
	}, "install agent-sandbox (CRDs and controller with --extensions); see docs/cluster.md")) {
		return out
	}
	ext, core, err := agentClients(rc)
	var a *api
	if err == nil {
		a, err = newAPI(rc, kube, ext, core, kube.Discovery())
	}
	if err != nil {
		add(Check{Name: "agent-sandbox CRDs", Detail: err.Error(), Fix: "see docs/cluster.md"})
		return out
	}
	out = append(out, Check{Name: "agent-sandbox API versions", OK: true,
		Detail: fmt.Sprintf("sbx uses %s/%s and %s/%s", GroupExtensions, a.ext, GroupCore, a.core)})
	out = append(out, poolCheck(ctx, a, cfg))
	if cfg.Pool != "" {
		out = append(out, runtimeCheck(ctx, a, kube, cfg))
		out = append(out, helperCheck(ctx, a, cfg, helperHash()))
	}
	for _, acc := range RequiredAccess {
		out = append(out, accessCheck(ctx, kube, cfg.Namespace, acc))
	}
	return out
}

func checkResult(name string, err error, detail func() string, fix string) Check {
	if err != nil {
		return Check{Name: name, Detail: err.Error(), Fix: fix}
	}
	return Check{Name: name, OK: true, Detail: detail()}
}

func poolCheck(ctx context.Context, a *api, cfg Config) Check {
	c := Check{Name: "warm pool"}
	if cfg.Pool == "" {
		c.Detail = "no pool configured"
		c.Fix = fmt.Sprintf("set %s to a SandboxWarmPool in namespace %q (sbx pool render writes one)", EnvPool, cfg.Namespace)
		return c
	}
	pool, err := a.poolGet(ctx, cfg.Namespace, cfg.Pool)
	switch {
	case apierrors.IsNotFound(err):
		c.Detail = (&PoolNotFoundError{Pool: cfg.Pool, Namespace: cfg.Namespace}).Error()
		c.Fix = "apply the pool (sbx pool render ... | kubectl apply -f -) or fix " + EnvPool + "/" + EnvNamespace
		return c
	case err != nil:
		c.Detail = apiError(err, a.server, "get", "sandboxwarmpools."+GroupExtensions, cfg.Namespace).Error()
		c.Fix = "see the RBAC checks below"
		return c
	}
	ready, want := pool.Ready, pool.Replicas
	c.Detail = fmt.Sprintf("%s/%s: %d of %d sandboxes ready", cfg.Namespace, cfg.Pool, ready, want)
	if ready > 0 {
		c.OK = true
		return c
	}
	c.Fix = "wait for the pool's pods (kubectl -n " + cfg.Namespace + " get pods), check their events, or raise spec.replicas"
	return c
}

func accessCheck(ctx context.Context, kube kubernetes.Interface, ns string, acc Access) Check {
	c := Check{Name: "RBAC " + acc.String()}
	r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: acc.Verb, Group: acc.Group, Resource: acc.Resource, Subresource: acc.Subresource,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		c.Detail = err.Error()
		c.Fix = "the API server refused a SelfSubjectAccessReview; check the credentials"
		return c
	}
	if r.Status.Allowed {
		c.OK, c.Detail = true, "allowed in namespace "+ns
		return c
	}
	c.Detail = strings.TrimSpace("denied in namespace " + ns + " " + r.Status.Reason)
	c.Fix = "apply cluster/deploy/rbac.yaml in namespace " + ns + " and use the kubeconfig sbx kubeconfig writes for its service account"
	return c
}

// gVisorHandler is the RuntimeClass handler of gVisor's containerd shim.
const gVisorHandler = "runsc"

// runtimeCheck reports the pool template's RuntimeClass and whether its
// pods run under gVisor: the template's runtimeClassName, that
// RuntimeClass's handler, and the runtime of the pool's pods as the API
// records them. Pods under runc share the node's kernel with every other
// tenant; production runs gVisor (docs/cluster.md).
func runtimeCheck(ctx context.Context, a *api, kube kubernetes.Interface, cfg Config) Check {
	c := Check{Name: "pool runtime (gVisor)"}
	fix := "render the pool with sbx pool render --runtime-class gvisor, on nodes set up with cluster/deploy (runsc)"
	pool, err := a.poolGet(ctx, cfg.Namespace, cfg.Pool)
	if err != nil {
		c.Detail, c.Fix = "the pool could not be read (see the warm pool check)", fix
		return c
	}
	tname := pool.Template
	if tname == "" {
		c.Detail, c.Fix = fmt.Sprintf("pool %s names no sandboxTemplateRef", cfg.Pool), fix
		return c
	}
	tmpl, err := a.templateGet(ctx, cfg.Namespace, tname)
	if err != nil {
		c.Detail = apiError(err, a.server, "get", "sandboxtemplates."+GroupExtensions, cfg.Namespace).Error()
		c.Fix = "see the RBAC checks below"
		return c
	}
	rc := ""
	if tmpl.Pod.RuntimeClassName != nil {
		rc = *tmpl.Pod.RuntimeClassName
	}
	if rc == "" {
		c.Detail = fmt.Sprintf("template %s sets no runtimeClassName: its pods run under the node's default runtime (runc), not gVisor", tname)
		c.Fix = fix
		return c
	}
	handler := ""
	obj, err := kube.NodeV1().RuntimeClasses().Get(ctx, rc, getOpts)
	switch {
	case err == nil:
		handler = obj.Handler
	case apierrors.IsNotFound(err):
		c.Detail = fmt.Sprintf("template %s asks for RuntimeClass %q, which does not exist: its pods cannot start", tname, rc)
		c.Fix = "apply cluster/deploy/runtimeclass.yaml (and install runsc on the nodes), or re-render the pool"
		return c
	}
	// The pods the pool made: their runtimeClassName as the API admitted
	// them (a RuntimeClass admission can set it, or refuse it).
	sel := "sbx.dev/tenant"
	if t := tmpl.PodLabels["sbx.dev/tenant"]; t != "" {
		sel += "=" + t
	}
	pods, _ := kube.CoreV1().Pods(cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	var under, other int
	if pods != nil {
		for _, p := range pods.Items {
			if p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == rc {
				under++
			} else {
				other++
			}
		}
	}
	podsText := fmt.Sprintf("%d of the namespace's sbx pods use it", under)
	if other > 0 {
		podsText += fmt.Sprintf(", %d do not", other)
	}
	switch handler {
	case gVisorHandler:
		c.OK = other == 0
		c.Detail = fmt.Sprintf("template %s: RuntimeClass %s, handler %s: gVisor; %s", tname, rc, handler, podsText)
		if !c.OK {
			c.Fix = "pods of an older template still run; they are replaced as they are claimed and released"
		}
	case "":
		// The handler is cluster-scoped: sbx's namespaced Role cannot read it.
		c.OK = strings.Contains(strings.ToLower(rc), "gvisor") && other == 0
		c.Detail = fmt.Sprintf("template %s: RuntimeClass %s (its handler is not readable with these credentials: %v); %s", tname, rc, err, podsText)
		if !c.OK {
			c.Fix = fix
		}
	default:
		c.Detail = fmt.Sprintf("template %s: RuntimeClass %s, handler %s: not gVisor (%s); %s", tname, rc, handler, gVisorHandler, podsText)
		c.Fix = fix
	}
	return c
}

// helperInit is the name of the init container RenderPool's --helper-image
// adds.
const helperInit = "sbx-helper"

// helperCheck says how the pool's pods get the in-pod helper: preinstalled
// (the template's AnnotHelper, and the init container that does it) or
// uploaded by each claim's first command, and which build sbx would accept
// (hash: of the helper this sbx uploads, "" when it has none).
func helperCheck(ctx context.Context, a *api, cfg Config, hash string) Check {
	c := Check{Name: "in-pod helper", OK: true}
	pool, err := a.poolGet(ctx, cfg.Namespace, cfg.Pool)
	var tmpl *templateView
	if err == nil && pool.Template != "" {
		tmpl, err = a.templateGet(ctx, cfg.Namespace, pool.Template)
	}
	if err != nil || tmpl == nil {
		c.OK, c.Detail, c.Fix = false, "the pool's template could not be read", "see the warm pool and RBAC checks"
		return c
	}
	own := "this sbx uploads its helper of sha256 " + short(hash)
	if hash == "" {
		own = "this sbx has no helper of its own to upload or compare (" + EnvHelper + " unset, no static sbx-inpod beside it): a preinstalled helper of protocol " + inpod.Version + " is used as it is"
	}
	var init *corev1.Container
	for i := range tmpl.Pod.InitContainers {
		if tmpl.Pod.InitContainers[i].Name == helperInit {
			init = &tmpl.Pod.InitContainers[i]
		}
	}
	switch {
	case tmpl.PodAnnotations[AnnotHelper] == HelperPreinstalled && init != nil:
		c.Detail = fmt.Sprintf("preinstalled by template %s's init container %s from image %s (%s); sbx starts it when its hash is the one sbx expects, else uploads its own; %s",
			tmpl.Name, helperInit, init.Image, strings.Join(init.Command, " "), own)
	case tmpl.PodAnnotations[AnnotHelper] == HelperPreinstalled:
		c.Detail = fmt.Sprintf("template %s says its pods have the helper (%s: %s); sbx checks its hash at each start and uploads its own when it differs; %s",
			tmpl.Name, AnnotHelper, HelperPreinstalled, own)
	case hash == "":
		c.OK = false
		c.Detail = fmt.Sprintf("template %s does not preinstall the helper, and this sbx has none to upload: commands that sync cannot run", tmpl.Name)
		c.Fix = "install sbx-inpod beside sbx (CGO_ENABLED=0 go install ./cmd/...) or set " + EnvHelper + "; or render the pool with sbx pool render --helper-image"
	default:
		c.Detail = fmt.Sprintf("uploaded into each new pod of template %s by its first command (sbx pool render --helper-image preinstalls it: a claim then needs no upload); %s", tmpl.Name, own)
	}
	return c
}

// short is the first 12 hex digits of a hash.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
