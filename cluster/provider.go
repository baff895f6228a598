package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"

	coreclient "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned"
	extclient "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/sbx-sh/sbx/sandbox"
)

var klogOnce sync.Once

// Provider claims sandboxes from an agent-sandbox warm pool.
type Provider struct {
	cfg Config
	log *slog.Logger

	mu  sync.Mutex
	api *api
	// newAPI, when set, replaces connect (tests).
	newAPI func(ctx context.Context) (*api, error)
}

// New returns a Provider for cfg. It does not contact the cluster until it
// is used. log may be nil.
func New(cfg Config, log *slog.Logger) *Provider {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// client-go logs through klog to stderr by default; sbx-mcp's stderr
	// must carry only its own structured log, so klog goes there too.
	klogOnce.Do(func() { klog.SetSlogLogger(log) })
	return &Provider{cfg: cfg.withDefaults(), log: log}
}

// NewForClients returns a Provider that uses the given clients instead of
// a kubeconfig (tests, and callers that already hold clients). rc is needed
// only for Exec.
func NewForClients(cfg Config, rc *rest.Config, kube kubernetes.Interface, ext extclient.Interface, core coreclient.Interface, d discovery.DiscoveryInterface, log *slog.Logger) *Provider {
	p := New(cfg, log)
	p.newAPI = func(context.Context) (*api, error) { return newAPI(rc, kube, ext, core, d) }
	return p
}

// Name returns "cluster".
func (p *Provider) Name() string { return "cluster" }

// Config returns the provider's configuration, defaults filled in.
func (p *Provider) Config() Config { return p.cfg }

func (p *Provider) connect(ctx context.Context) (*api, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.api != nil {
		return p.api, nil
	}
	var a *api
	var err error
	if p.newAPI != nil {
		a, err = p.newAPI(ctx)
	} else {
		a, err = connect(ctx, p.cfg)
	}
	if err != nil {
		return nil, err
	}
	p.api = a
	return a, nil
}

// state is what the host keeps about a claim, in <StateDir>/cluster.json.
type state struct {
	Version   int    `json:"version"`
	Namespace string `json:"namespace"`
	Claim     string `json:"claim"`
	UID       string `json:"uid"`
	Pod       string `json:"pod"`
	// PodUID tells the pod sbx found from one made again under its name
	// (agent-sandbox v0.5.6 recreates a deleted pod at once): a new pod has
	// none of the sandbox's processes or files.
	PodUID    string `json:"pod_uid,omitempty"`
	Container string `json:"container"`
	Session   string `json:"session"`
}

const stateFile = "cluster.json"

func readState(dir string) (state, error) {
	var st state
	if dir == "" {
		return st, os.ErrNotExist
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func writeState(dir string, st state) error {
	if dir == "" {
		return nil
	}
	st.Version = 1
	b, _ := json.Marshal(st)
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save claim state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

func (p *Provider) ttl(spec sandbox.Spec) time.Duration {
	if spec.IdleTTL > 0 {
		return spec.IdleTTL
	}
	return p.cfg.IdleTTL
}

func progress(spec sandbox.Spec, format string, args ...any) {
	if spec.Progress != nil {
		spec.Progress(fmt.Sprintf(format, args...))
	}
}

// Claim creates a SandboxClaim for the configured pool and waits until its
// sandbox is Ready. In persistent mode it first reuses a usable claim
// labelled with the session key.
func (p *Provider) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	a, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	if p.cfg.Persistent {
		sb, err := p.findByLabel(ctx, a, spec)
		if err == nil {
			progress(spec, "reusing claim %s (persistent session %s)", sb.claim, spec.Name)
			return sb, writeState(spec.StateDir, sb.state())
		}
		if !errors.Is(err, sandbox.ErrNotFound) && !isStale(err) {
			return nil, err
		}
	}
	ns := p.cfg.Namespace
	if p.cfg.Pool == "" {
		return nil, &PoolNotFoundError{Namespace: ns}
	}
	checkPool := func(pool *poolView, err error) error {
		if apierrors.IsNotFound(err) && !isMissingType(err) {
			return &PoolNotFoundError{Pool: p.cfg.Pool, Namespace: ns}
		}
		if err != nil {
			return apiError(err, a.server, "get", "sandboxwarmpools."+GroupExtensions, ns)
		}
		return nil
	}
	// A v1alpha1 claim names the pool's template, so the pool is read
	// first. A v1beta1 claim names the pool itself: the pool is read while
	// the claim is created (one round trip less before the claim's wait),
	// and a claim of a pool that is not there is deleted again.
	var pool *poolView
	var poolDone chan error
	if a.ext == "v1alpha1" {
		pool, err = a.poolGet(ctx, ns, p.cfg.Pool)
		if err := checkPool(pool, err); err != nil {
			return nil, err
		}
	} else {
		pool = &poolView{ObjectMeta: metav1.ObjectMeta{Name: p.cfg.Pool, Namespace: ns}}
		poolDone = make(chan error, 1)
		go func() {
			pv, err := a.poolGet(ctx, ns, p.cfg.Pool)
			poolDone <- checkPool(pv, err)
		}()
	}
	host, _ := os.Hostname()
	obj, err := claimObject(a.ext, metav1.ObjectMeta{
		GenerateName: claimGenerateName(p.cfg.Owner),
		Namespace:    ns,
		Labels:       claimLabels(p.cfg.Owner, spec.Name, p.cfg.Persistent),
		Annotations:  map[string]string{AnnotSessionKey: spec.Name, AnnotOwner: p.cfg.Owner, AnnotHost: host},
	}, pool, time.Now().Add(p.ttl(spec)))
	if err != nil {
		return nil, err
	}
	created, err := a.claimCreate(ctx, ns, obj)
	if poolDone != nil {
		if perr := <-poolDone; perr != nil {
			if err == nil {
				p.deleteClaim(a, ns, created.GetName())
			}
			return nil, perr
		}
	}
	if err != nil {
		return nil, apiError(err, a.server, "create", "sandboxclaims."+GroupExtensions, ns)
	}
	progress(spec, "claimed %s from pool %s; waiting for its sandbox", created.GetName(), p.cfg.Pool)
	sb, err := p.waitReady(ctx, a, created, spec)
	if err != nil {
		return nil, err
	}
	sb.fresh = true // a pod new to sbx: the helper goes in before the first start
	// Upload and start the helper now, while the caller prepares its first
	// command (the engine scans the code dirs for the first push); that
	// command waits for it.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sb.helperMux(ctx)
	}()
	return sb, writeState(spec.StateDir, sb.state())
}

// readyCondition returns the claim's Ready condition, if it has one.
func readyCondition(c *claimView) (status, reason, message string, ok bool) {
	for _, cd := range c.Conditions {
		if cd.Type == "Ready" {
			return string(cd.Status), cd.Reason, cd.Message, true
		}
	}
	return "", "", "", false
}

func conditionsText(c *claimView) string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, cd := range c.Conditions {
		s := fmt.Sprintf("%v=%v", cd.Type, cd.Status)
		if cd.Reason != "" {
			s += " (" + cd.Reason
			if cd.Message != "" {
				s += ": " + cd.Message
			}
			s += ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// sandboxName is the name of the claim's Sandbox: status.sandbox.name, else
// the claim's own name (agent-sandbox v0.1.1 names the Sandbox after the
// claim, and spells the status key "Name", which typed decoding drops).
func sandboxName(c *claimView) string {
	if c.SandboxName != "" {
		return c.SandboxName
	}
	return c.Name
}

// waitReady watches claim until it is Ready, then finds its pod. On timeout
// it deletes the claim and returns a *ClaimTimeoutError.
//
// The watch is client-go's watchtools.Until from the version the create
// returned (a RetryWatcher: every change since, in order, watched again
// from the last version seen when it breaks); a version the server no
// longer keeps (410) hands over to watchtools.UntilWithSync, an informer
// that lists first. An error retrying cannot fix (RBAC, a missing type)
// ends it at once instead of waiting for the timeout.
func (p *Provider) waitReady(ctx context.Context, a *api, claim *claimView, spec sandbox.Spec) (*Sandbox, error) {
	ns, name := claim.Namespace, claim.Name
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, p.cfg.ClaimTimeout)
	defer cancel()

	// Progress comes from the watch and from a ticker: one at a time.
	var pmu sync.Mutex
	say := func(format string, args ...any) {
		pmu.Lock()
		defer pmu.Unlock()
		progress(spec, format, args...)
	}
	tickDone := make(chan struct{})
	tctx, stopTick := context.WithCancel(wctx)
	go func() {
		defer close(tickDone)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-tick.C:
				say("still waiting for claim %s (%s): pool %s has %s ready", name,
					time.Since(start).Round(time.Second), p.cfg.Pool, p.poolReadyText(tctx, a))
			}
		}
	}()
	defer func() { stopTick(); <-tickDone }()

	var fatalMu sync.Mutex
	var fatal error // an error retrying cannot fix
	// The watch from the create's resourceVersion (below) cannot recover
	// from a version the server no longer has: it stops, and the informer
	// takes over.
	var expired atomic.Bool
	uctx, stopUntil := context.WithCancel(wctx)
	defer stopUntil()
	check := func(err error) error {
		if err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || (apierrors.IsNotFound(err) && isMissingType(err))) {
			fatalMu.Lock()
			if fatal == nil {
				fatal = err
			}
			fatalMu.Unlock()
			cancel()
		}
		if err != nil && (apierrors.IsGone(err) || apierrors.IsResourceExpired(err)) {
			expired.Store(true)
			stopUntil()
		}
		return err
	}
	lw, objType := a.claimWatch(ns, fields.OneTermEqualSelector("metadata.name", name).String(), check)
	last := claim
	lastCond := ""
	gone := false
	seen := func(u *claimView) bool {
		last = u
		if c := conditionsText(u); c != lastCond && c != "" {
			lastCond = c
			say("claim %s: %s", name, c)
		}
		st, _, _, _ := readyCondition(u)
		return st == "True"
	}
	event := func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			check(err)
			return false, err
		}
		u, ok := asClaim(ev.Object)
		if !ok || u.Name != name {
			return false, nil
		}
		switch ev.Type {
		case watch.Deleted:
			gone = true
			return true, nil
		case watch.Added, watch.Modified:
			return seen(u), nil
		}
		return false, nil
	}
	// A watch from the resourceVersion the create returned sees every
	// change of the claim since, its deletion included, with no list first:
	// the informer's wait for its cache (cache.WaitForCacheSync polls every
	// 100 ms) cost each claim 60 ms past its Ready. RetryWatcher takes a
	// broken watch up again from the last version seen; only a version
	// the server no longer keeps (410) needs the informer's list.
	var err error
	rv := claim.ResourceVersion
	fromVersion := rv != "" && rv != "0" // what a RetryWatcher can start from
	if fromVersion {
		_, err = watchtools.Until(uctx, rv, lw, event)
	}
	if !fromVersion || (expired.Load() && wctx.Err() == nil) {
		p.log.Debug("claim watch: listing first", "claim", name, "resourceVersion", rv, "expired", expired.Load())
		_, err = watchtools.UntilWithSync(wctx, lw, objType,
			func(store cache.Store) (bool, error) {
				obj, exists, err := store.GetByKey(ns + "/" + name)
				if err != nil {
					return false, err
				}
				o, _ := obj.(runtime.Object)
				u, ok := asClaim(o)
				if !exists || !ok {
					gone = true
					return true, nil
				}
				return seen(u), nil
			}, event)
	}
	fatalMu.Lock()
	ferr := fatal
	fatalMu.Unlock()
	switch {
	case ferr != nil:
		p.deleteClaim(a, ns, name)
		return nil, apiError(ferr, a.server, "watch", "sandboxclaims."+GroupExtensions, ns)
	case gone:
		return nil, fmt.Errorf("claim %s in namespace %q was deleted while sbx waited for it", name, ns)
	case wctx.Err() != nil:
		return nil, p.claimFailed(ctx, a, last, start)
	case err != nil:
		p.deleteClaim(a, ns, name)
		return nil, apiError(err, a.server, "watch", "sandboxclaims."+GroupExtensions, ns)
	}
	sb, err := p.sandboxFor(wctx, a, last)
	if err != nil {
		if wctx.Err() != nil {
			return nil, p.claimFailed(ctx, a, last, start)
		}
		p.deleteClaim(a, ns, name)
		return nil, err
	}
	if err := p.checkLimits(sb, spec.Limits); err != nil {
		p.deleteClaim(a, ns, name)
		return nil, err
	}
	sb.ttl = p.ttl(spec)
	sb.session = spec.Name
	sb.stateDir = spec.StateDir
	p.log.Debug("claim ready", "claim", name, "pod", sb.pod, "took", time.Since(start))
	return sb, nil
}

// claimFailed builds the timeout error (or the caller's cancellation) and
// deletes the claim.
func (p *Provider) claimFailed(ctx context.Context, a *api, last *claimView, start time.Time) error {
	ns, name := last.Namespace, last.Name
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if cur, err := a.claimGet(dctx, ns, name); err == nil {
		last = cur
	}
	p.deleteClaim(a, ns, name)
	if ctx.Err() != nil {
		return fmt.Errorf("claim %s: %w (the claim was deleted)", name, ctx.Err())
	}
	e := &ClaimTimeoutError{Claim: name, Pool: p.cfg.Pool, Namespace: ns, Waited: time.Since(start).Round(time.Second).String(),
		Conditions: conditionsText(last)}
	if pool, err := a.poolGet(dctx, ns, p.cfg.Pool); err == nil {
		e.PoolReady, e.PoolWanted = pool.Ready, pool.Replicas
	}
	return e
}

func (p *Provider) poolReadyText(ctx context.Context, a *api) string {
	pool, err := a.poolGet(ctx, p.cfg.Namespace, p.cfg.Pool)
	if err != nil {
		return "an unknown number"
	}
	return fmt.Sprintf("%d of %d", pool.Ready, pool.Replicas)
}

// deleteClaim deletes a claim in the background of any cancelled context;
// errors are logged only (the claim expires by its shutdownTime anyway).
func (p *Provider) deleteClaim(a *api, ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fg := metav1.DeletePropagationForeground
	if err := a.claimDelete(ctx, ns, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("delete claim", "claim", name, "err", err)
	}
}

// sandboxFor finds the pod of a Ready claim: the Sandbox's pod-name
// annotation, else the Sandbox's name, else the pod labelled with the claim's
// UID.
func (p *Provider) sandboxFor(ctx context.Context, a *api, claim *claimView) (*Sandbox, error) {
	ns := claim.Namespace
	sbName := sandboxName(claim)
	// The pod usually has the Sandbox's name: it is read while the Sandbox
	// is (one round trip instead of two), and used unless the Sandbox's
	// pod-name annotation names another.
	type podGet struct {
		pod *corev1.Pod
		err error
	}
	sameName := make(chan podGet, 1) // buffered: never read when another name wins
	go func() {
		pp, err := a.kube.CoreV1().Pods(ns).Get(ctx, sbName, getOpts)
		sameName <- podGet{pp, err}
	}()
	var candidates []string
	sbx, err := a.sbs(ctx, ns, sbName)
	switch {
	case err == nil:
		if pn := sbx.GetAnnotations()[annotPodName]; pn != "" && pn != sbName {
			candidates = append(candidates, pn)
		}
		candidates = append(candidates, sbName)
	case apierrors.IsNotFound(err):
		candidates = append(candidates, sbName)
	default:
		return nil, apiError(err, a.server, "get", "sandboxes."+GroupCore, ns)
	}
	var pod *corev1.Pod
	for _, c := range candidates {
		var pp *corev1.Pod
		var err error
		if c == sbName {
			g := <-sameName
			pp, err = g.pod, g.err
		} else {
			pp, err = a.kube.CoreV1().Pods(ns).Get(ctx, c, getOpts)
		}
		if err == nil {
			pod = pp
			break
		}
		if !apierrors.IsNotFound(err) {
			return nil, apiError(err, a.server, "get", "pods", ns)
		}
	}
	if pod == nil {
		list, err := a.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelClaimUID + "=" + string(claim.GetUID())})
		if err != nil {
			return nil, apiError(err, a.server, "list", "pods", ns)
		}
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				pod = &list.Items[i]
				break
			}
		}
	}
	if pod == nil {
		return nil, fmt.Errorf("claim %s is Ready but its pod was not found (tried %s and label %s=%s)",
			claim.GetName(), strings.Join(candidates, ", "), labelClaimUID, claim.GetUID())
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("claim %s: pod %s is not running (phase %s)", claim.GetName(), pod.Name, pod.Status.Phase)
	}
	sb := &Sandbox{
		p: p, a: a, ns: ns, claim: claim.GetName(), uid: string(claim.GetUID()),
		pod: pod.Name, podUID: string(pod.UID), container: pod.Spec.Containers[0].Name,
		session: claim.GetAnnotations()[AnnotSessionKey], ttl: p.cfg.IdleTTL,
	}
	sb.preinstalled = pod.Annotations[AnnotHelper] == HelperPreinstalled
	if m, ok := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; ok {
		sb.podMemory = m.Value()
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == sb.container {
			sb.restarts, sb.restartsKnown = cs.RestartCount, true
		}
	}
	sb.shutdown = claim.ShutdownTime
	sb.lastRenew = time.Now()
	return sb, nil
}

func isStale(err error) bool {
	var s *sandbox.StaleError
	return errors.As(err, &s)
}

func isMissingType(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Details != nil && se.Status().Details.Name == ""
}

// Attach finds the claim a previous Claim for spec left: the one recorded in
// spec.StateDir, else (persistent mode) the newest claim labelled with the
// session key. A claim that is gone or whose pod is gone gives a
// *sandbox.StaleError (and is deleted); no claim at all gives
// sandbox.ErrNotFound.
func (p *Provider) Attach(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if p.cfg.Relay {
		if sb := p.viaRelay(spec); sb != nil {
			return sb, nil
		}
	}
	a, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	st, err := readState(spec.StateDir)
	if err != nil {
		if !p.cfg.Persistent {
			return nil, sandbox.ErrNotFound
		}
		sb, err := p.findByLabel(ctx, a, spec)
		if err != nil {
			return nil, err
		}
		return sb, writeState(spec.StateDir, sb.state())
	}
	sb, err := p.attachClaim(ctx, a, st.Namespace, st.Claim, spec)
	if err != nil {
		if isStale(err) {
			os.Remove(filepath.Join(spec.StateDir, stateFile))
		}
		return nil, err
	}
	if p.cfg.Relay {
		p.startRelay(sb, spec)
	}
	return sb, nil
}

// attachClaim checks that claim is still usable and returns its sandbox.
func (p *Provider) attachClaim(ctx context.Context, a *api, ns, name string, spec sandbox.Spec) (*Sandbox, error) {
	claim, err := a.claimGet(ctx, ns, name)
	if apierrors.IsNotFound(err) && !isMissingType(err) {
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("its claim %s no longer exists (expired by its shutdownTime, or deleted)", name)}
	}
	if err != nil {
		return nil, apiError(err, a.server, "get", "sandboxclaims."+GroupExtensions, ns)
	}
	if claim.GetDeletionTimestamp() != nil {
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("its claim %s is being deleted", name)}
	}
	if st, reason, msg, _ := readyCondition(claim); st != "True" {
		p.deleteClaim(a, ns, name)
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("its claim %s is not Ready (%s: %s); deleted it", name, reason, msg)}
	}
	sb, err := p.sandboxFor(ctx, a, claim)
	if err != nil {
		var fe *ForbiddenError
		var ue *UnreachableError
		if errors.As(err, &fe) || errors.As(err, &ue) {
			return nil, err
		}
		p.deleteClaim(a, ns, name)
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: err.Error() + "; deleted the claim"}
	}
	if st, err := readState(spec.StateDir); err == nil && st.Claim == name && st.PodUID != "" && st.PodUID != sb.podUID {
		p.deleteClaim(a, ns, name)
		return nil, &sandbox.StaleError{Name: spec.Name, Reason: fmt.Sprintf("its pod %s was deleted and made again (uid %s, was %s): the sandbox's processes and files are gone; deleted the claim", sb.pod, sb.podUID, st.PodUID)}
	}
	sb.session = spec.Name
	sb.stateDir = spec.StateDir
	if spec.IdleTTL > 0 {
		sb.ttl = spec.IdleTTL
	}
	return sb, nil
}

// findByLabel returns the newest usable claim labelled with the session key
// of this owner; unusable ones are deleted.
func (p *Provider) findByLabel(ctx context.Context, a *api, spec sandbox.Spec) (*Sandbox, error) {
	claims, err := p.listClaims(ctx, a, spec.Name)
	if err != nil {
		return nil, err
	}
	var stale error
	for _, c := range claims {
		sb, err := p.attachClaim(ctx, a, c.GetNamespace(), c.GetName(), spec)
		if err == nil {
			return sb, nil
		}
		if !isStale(err) {
			return nil, err
		}
		stale = err
	}
	if stale != nil {
		return nil, stale
	}
	return nil, sandbox.ErrNotFound
}

// listClaims lists this owner's claims (one session's when session is set),
// newest first, skipping those whose exact session key differs (hashed label
// values could collide).
func (p *Provider) listClaims(ctx context.Context, a *api, session string) ([]claimView, error) {
	ns := p.cfg.Namespace
	list, err := a.claimList(ctx, ns, metav1.ListOptions{LabelSelector: ownerSelector(p.cfg.Owner, session)})
	if err != nil {
		return nil, apiError(err, a.server, "list", "sandboxclaims."+GroupExtensions, ns)
	}
	var out []claimView
	for _, c := range list {
		if session != "" && c.GetAnnotations()[AnnotSessionKey] != session {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y claimView) int {
		return y.GetCreationTimestamp().Compare(x.GetCreationTimestamp().Time)
	})
	return out, nil
}

// ClaimInfo describes one of this user's claims (sbx ls --backend cluster).
type ClaimInfo struct {
	Name, Namespace, Session string
	Persistent               bool
	Ready                    bool
	Created, ShutdownTime    time.Time
}

// List returns this user's claims in the configured namespace, newest first.
func (p *Provider) List(ctx context.Context) ([]ClaimInfo, error) {
	a, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	claims, err := p.listClaims(ctx, a, "")
	if err != nil {
		return nil, err
	}
	var out []ClaimInfo
	for _, c := range claims {
		st, _, _, _ := readyCondition(&c)
		in := ClaimInfo{Name: c.GetName(), Namespace: c.GetNamespace(), Session: c.GetAnnotations()[AnnotSessionKey],
			Persistent: c.GetLabels()[LabelPersistent] == "true", Ready: st == "True", Created: c.GetCreationTimestamp().Time,
			ShutdownTime: c.ShutdownTime}
		out = append(out, in)
	}
	return out, nil
}

// ReleaseSession deletes every claim of this user labelled with the session
// key and returns their names.
func (p *Provider) ReleaseSession(ctx context.Context, session string) ([]string, error) {
	if session == "" {
		return nil, errors.New("release: empty session key")
	}
	return p.release(ctx, session)
}

// ReleaseAll deletes every claim of this user in the configured namespace
// and returns their names.
func (p *Provider) ReleaseAll(ctx context.Context) ([]string, error) {
	return p.release(ctx, "")
}

func (p *Provider) release(ctx context.Context, session string) ([]string, error) {
	a, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	claims, err := p.listClaims(ctx, a, session)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	fg := metav1.DeletePropagationForeground
	for _, c := range claims {
		err := a.claimDelete(ctx, c.GetNamespace(), c.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, apiError(err, a.server, "delete", "sandboxclaims."+GroupExtensions, c.GetNamespace()))
			continue
		}
		names = append(names, c.GetName())
	}
	return names, errors.Join(errs...)
}

// checkLimits holds a new claim to spec.Limits. Inside a pod sbx cannot
// make a cgroup of its own: the memory bound is the pod's, set by the pool
// template (limits.memory of its container). A pod that may use more than
// the sandbox's MemoryBytes is refused rather than silently looser. The
// number of processes is bounded by the node's podPidsLimit and the disk
// by the pod's ephemeral storage, neither of which the pod shows (see
// docs/security.md, Bounds).
func (p *Provider) checkLimits(sb *Sandbox, l sandbox.Limits) error {
	if l.MemoryBytes <= 0 || (sb.podMemory > 0 && sb.podMemory <= l.MemoryBytes) {
		return nil
	}
	has := "no memory limit"
	if sb.podMemory > 0 {
		has = "a memory limit of " + resource.NewQuantity(sb.podMemory, resource.BinarySI).String()
	}
	want := resource.NewQuantity(l.MemoryBytes, resource.BinarySI).String()
	return fmt.Errorf("claim %s: pod %s of pool %s has %s, looser than the sandbox's memory limit of %s, which sbx cannot tighten inside a pod; the claim was deleted. Render the pool with sbx pool render --memory %s (or lower), or set memory in sbx's config to at least the pool's limit",
		sb.claim, sb.pod, p.cfg.Pool, has, want, want)
}
