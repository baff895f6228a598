package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	coreclient "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"
	extv1alpha1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// agent-sandbox's resources in agent-sandbox's own Go types (v0.5.6), for
// both API versions sbx speaks. The rest of the package reads a claim, a
// pool and a template through the version-neutral views below, so one code
// path serves v1alpha1 and v1beta1; only the claim sbx creates differs
// (claimObject).

// claimView is a SandboxClaim of either version, as sbx reads it.
type claimView struct {
	metav1.ObjectMeta
	Conditions []metav1.Condition
	// SandboxName is status.sandbox.name. agent-sandbox v0.1.1 spells the
	// key "Name", which the API machinery's case-sensitive decoding drops;
	// that version names the Sandbox after the claim, which sandboxName
	// falls back to.
	SandboxName    string
	ShutdownTime   time.Time // spec.lifecycle.shutdownTime; zero if unset
	ShutdownPolicy string
	TemplateRef    string // v1alpha1 spec.sandboxTemplateRef.name
	WarmPoolRef    string // v1beta1 spec.warmPoolRef.name
}

// poolView is a SandboxWarmPool of either version.
type poolView struct {
	metav1.ObjectMeta
	Template        string // spec.sandboxTemplateRef.name
	Replicas, Ready int64  // spec.replicas, status.readyReplicas
}

// templateView is a SandboxTemplate of either version: its pod template.
type templateView struct {
	metav1.ObjectMeta
	PodLabels      map[string]string
	PodAnnotations map[string]string
	Pod            corev1.PodSpec
}

// extAPI is the extensions group (claims, pools, templates) in one version.
type extAPI interface {
	claimGet(ctx context.Context, ns, name string) (*claimView, error)
	claimList(ctx context.Context, ns string, o metav1.ListOptions) ([]claimView, error)
	claimCreate(ctx context.Context, ns string, obj runtime.Object) (*claimView, error)
	claimPatch(ctx context.Context, ns, name string, pt types.PatchType, data []byte) (*claimView, error)
	claimDelete(ctx context.Context, ns, name string, o metav1.DeleteOptions) error
	// claimWatch is a ListerWatcher of the claims in ns matching the field
	// selector sel, each call's error passed through check, and the type
	// of object it yields (asClaim reads them).
	claimWatch(ns, sel string, check func(error) error) (cache.ListerWatcher, runtime.Object)
	poolGet(ctx context.Context, ns, name string) (*poolView, error)
	templateGet(ctx context.Context, ns, name string) (*templateView, error)
}

// sandboxGetter reads a Sandbox (core group) in one version.
type sandboxGetter func(ctx context.Context, ns, name string) (metav1.Object, error)

// claimsClient is the part of a typed SandboxClaim client sbx uses; C is
// the version's *SandboxClaim, L its *SandboxClaimList.
type claimsClient[C, L runtime.Object] interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (C, error)
	List(ctx context.Context, o metav1.ListOptions) (L, error)
	Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj C, o metav1.CreateOptions) (C, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, subresources ...string) (C, error)
	Delete(ctx context.Context, name string, o metav1.DeleteOptions) error
}

type getter[T any] interface {
	Get(ctx context.Context, name string, o metav1.GetOptions) (T, error)
}

// typedExt is extAPI over one version's typed clients.
type typedExt[C, L, P, T runtime.Object] struct {
	claims     func(ns string) claimsClient[C, L]
	pools      func(ns string) getter[P]
	templates  func(ns string) getter[T]
	toClaim    func(C) *claimView
	items      func(L) []claimView
	toPool     func(P) *poolView
	toTemplate func(T) *templateView
	lister     any // the clientset, for ToListWatcherWithWatchListSemantics
}

func (e *typedExt[C, L, P, T]) claimGet(ctx context.Context, ns, name string) (*claimView, error) {
	c, err := e.claims(ns).Get(ctx, name, getOpts)
	if err != nil {
		return nil, err
	}
	return e.toClaim(c), nil
}

func (e *typedExt[C, L, P, T]) claimList(ctx context.Context, ns string, o metav1.ListOptions) ([]claimView, error) {
	l, err := e.claims(ns).List(ctx, o)
	if err != nil {
		return nil, err
	}
	return e.items(l), nil
}

func (e *typedExt[C, L, P, T]) claimCreate(ctx context.Context, ns string, obj runtime.Object) (*claimView, error) {
	c, ok := obj.(C)
	if !ok {
		return nil, fmt.Errorf("internal error: a %T is not a claim of this API version", obj)
	}
	created, err := e.claims(ns).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return e.toClaim(created), nil
}

func (e *typedExt[C, L, P, T]) claimPatch(ctx context.Context, ns, name string, pt types.PatchType, data []byte) (*claimView, error) {
	c, err := e.claims(ns).Patch(ctx, name, pt, data, metav1.PatchOptions{})
	if err != nil {
		return nil, err
	}
	return e.toClaim(c), nil
}

func (e *typedExt[C, L, P, T]) claimDelete(ctx context.Context, ns, name string, o metav1.DeleteOptions) error {
	return e.claims(ns).Delete(ctx, name, o)
}

func (e *typedExt[C, L, P, T]) claimWatch(ns, sel string, check func(error) error) (cache.ListerWatcher, runtime.Object) {
	claims := e.claims(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			l, err := claims.List(ctx, o)
			return l, check(err)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			w, err := claims.Watch(ctx, o)
			return w, check(err)
		},
	}
	var zero C
	return cache.ToListWatcherWithWatchListSemantics(lw, e.lister), zero.DeepCopyObject()
}

func (e *typedExt[C, L, P, T]) poolGet(ctx context.Context, ns, name string) (*poolView, error) {
	p, err := e.pools(ns).Get(ctx, name, getOpts)
	if err != nil {
		return nil, err
	}
	return e.toPool(p), nil
}

func (e *typedExt[C, L, P, T]) templateGet(ctx context.Context, ns, name string) (*templateView, error) {
	t, err := e.templates(ns).Get(ctx, name, getOpts)
	if err != nil {
		return nil, err
	}
	return e.toTemplate(t), nil
}

// newExtAPI is the extensions group in version v ("v1alpha1" or "v1beta1").
func newExtAPI(v string, c extclient.Interface) extAPI {
	if v == "v1alpha1" {
		x := c.ExtensionsV1alpha1()
		return &typedExt[*extv1alpha1.SandboxClaim, *extv1alpha1.SandboxClaimList, *extv1alpha1.SandboxWarmPool, *extv1alpha1.SandboxTemplate]{
			claims: func(ns string) claimsClient[*extv1alpha1.SandboxClaim, *extv1alpha1.SandboxClaimList] {
				return x.SandboxClaims(ns)
			},
			pools:     func(ns string) getter[*extv1alpha1.SandboxWarmPool] { return x.SandboxWarmPools(ns) },
			templates: func(ns string) getter[*extv1alpha1.SandboxTemplate] { return x.SandboxTemplates(ns) },
			toClaim:   claimV1alpha1,
			items: func(l *extv1alpha1.SandboxClaimList) []claimView {
				out := make([]claimView, len(l.Items))
				for i := range l.Items {
					out[i] = *claimV1alpha1(&l.Items[i])
				}
				return out
			},
			toPool: func(p *extv1alpha1.SandboxWarmPool) *poolView {
				return &poolView{ObjectMeta: p.ObjectMeta, Template: p.Spec.TemplateRef.Name,
					Replicas: int64(p.Spec.Replicas), Ready: int64(p.Status.ReadyReplicas)}
			},
			toTemplate: func(t *extv1alpha1.SandboxTemplate) *templateView {
				return &templateView{ObjectMeta: t.ObjectMeta, PodLabels: t.Spec.PodTemplate.ObjectMeta.Labels,
					PodAnnotations: t.Spec.PodTemplate.ObjectMeta.Annotations, Pod: t.Spec.PodTemplate.Spec}
			},
			lister: c,
		}
	}
	x := c.ExtensionsV1beta1()
	return &typedExt[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList, *extv1beta1.SandboxWarmPool, *extv1beta1.SandboxTemplate]{
		claims: func(ns string) claimsClient[*extv1beta1.SandboxClaim, *extv1beta1.SandboxClaimList] {
			return x.SandboxClaims(ns)
		},
		pools:     func(ns string) getter[*extv1beta1.SandboxWarmPool] { return x.SandboxWarmPools(ns) },
		templates: func(ns string) getter[*extv1beta1.SandboxTemplate] { return x.SandboxTemplates(ns) },
		toClaim:   claimV1beta1,
		items: func(l *extv1beta1.SandboxClaimList) []claimView {
			out := make([]claimView, len(l.Items))
			for i := range l.Items {
				out[i] = *claimV1beta1(&l.Items[i])
			}
			return out
		},
		toPool: func(p *extv1beta1.SandboxWarmPool) *poolView {
			pi := &poolView{ObjectMeta: p.ObjectMeta, Template: p.Spec.TemplateRef.Name, Ready: int64(p.Status.ReadyReplicas)}
			if p.Spec.Replicas != nil {
				pi.Replicas = int64(*p.Spec.Replicas)
			}
			return pi
		},
		toTemplate: func(t *extv1beta1.SandboxTemplate) *templateView {
			return &templateView{ObjectMeta: t.ObjectMeta, PodLabels: t.Spec.PodTemplate.ObjectMeta.Labels,
				PodAnnotations: t.Spec.PodTemplate.ObjectMeta.Annotations, Pod: t.Spec.PodTemplate.Spec}
		},
		lister: c,
	}
}

func claimV1alpha1(c *extv1alpha1.SandboxClaim) *claimView {
	out := &claimView{ObjectMeta: c.ObjectMeta, Conditions: c.Status.Conditions, SandboxName: c.Status.SandboxStatus.Name,
		TemplateRef: c.Spec.TemplateRef.Name}
	if l := c.Spec.Lifecycle; l != nil {
		out.ShutdownPolicy = string(l.ShutdownPolicy)
		if l.ShutdownTime != nil {
			out.ShutdownTime = l.ShutdownTime.Time
		}
	}
	return out
}

func claimV1beta1(c *extv1beta1.SandboxClaim) *claimView {
	out := &claimView{ObjectMeta: c.ObjectMeta, Conditions: c.Status.Conditions, SandboxName: c.Status.SandboxStatus.Name,
		WarmPoolRef: c.Spec.WarmPoolRef.Name}
	if l := c.Spec.Lifecycle; l != nil {
		out.ShutdownPolicy = string(l.ShutdownPolicy)
		if l.ShutdownTime != nil {
			out.ShutdownTime = l.ShutdownTime.Time
		}
	}
	return out
}

// asClaim reads a claim object of either version, as a watch yields it.
func asClaim(o runtime.Object) (*claimView, bool) {
	switch c := o.(type) {
	case *extv1alpha1.SandboxClaim:
		return claimV1alpha1(c), true
	case *extv1beta1.SandboxClaim:
		return claimV1beta1(c), true
	}
	return nil, false
}

// claimObject is the SandboxClaim sbx creates for pool in version v, with
// meta and a lifecycle that deletes it at shutdown. A v1alpha1 claim names
// the pool's template (the pool's pods are adopted from it); a v1beta1
// claim names the pool itself.
func claimObject(v string, meta metav1.ObjectMeta, pool *poolView, shutdown time.Time) (runtime.Object, error) {
	at := metav1.NewTime(shutdown.UTC().Truncate(time.Second))
	switch v {
	case "v1alpha1":
		if pool.Template == "" {
			return nil, fmt.Errorf("SandboxWarmPool %q in namespace %q has no spec.sandboxTemplateRef.name", pool.Name, pool.Namespace)
		}
		return &extv1alpha1.SandboxClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: extv1alpha1.GroupVersion.String(), Kind: "SandboxClaim"},
			ObjectMeta: meta,
			Spec: extv1alpha1.SandboxClaimSpec{
				TemplateRef: extv1alpha1.SandboxTemplateRef{Name: pool.Template},
				Lifecycle:   &extv1alpha1.Lifecycle{ShutdownTime: &at, ShutdownPolicy: extv1alpha1.ShutdownPolicyDelete},
			},
		}, nil
	default: // v1beta1
		return &extv1beta1.SandboxClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim"},
			ObjectMeta: meta,
			Spec: extv1beta1.SandboxClaimSpec{
				WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool.Name},
				Lifecycle:   &extv1beta1.Lifecycle{ShutdownTime: &at, ShutdownPolicy: extv1beta1.ShutdownPolicyDelete},
			},
		}, nil
	}
}

// newSandboxGetter reads Sandboxes in version v of the core group.
func newSandboxGetter(v string, c coreclient.Interface) sandboxGetter {
	if v == "v1alpha1" {
		return func(ctx context.Context, ns, name string) (metav1.Object, error) {
			// Not the typed nil: a caller tests the error, not the object.
			s, err := c.AgentsV1alpha1().Sandboxes(ns).Get(ctx, name, getOpts)
			if err != nil {
				return nil, err
			}
			return s, nil
		}
	}
	return func(ctx context.Context, ns, name string) (metav1.Object, error) {
		s, err := c.AgentsV1beta1().Sandboxes(ns).Get(ctx, name, getOpts)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}
