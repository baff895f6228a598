package cluster

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// watchSandbox follows the sandbox's pod and its claim from its first
// command on. A pod deleted in the API can keep running on its node for a
// while, and commands would still reach it; a claim that expired or was
// released is gone even while its pod still terminates. So when either
// watch sees its object deleted, being deleted, stopped, or (the pod) given
// to another claim, it marks the sandbox gone and ends the helper's exec:
// the command in flight and every later one report the sandbox lost, as an
// exec of their own against a pod that no longer exists would.
//
// Each follows its object with client-go's watchtools.UntilWithSync (an
// informer: list, then watch from that version, re-listing when the watch
// expires or breaks), so no event is lost between a list and a watch.
func (s *Sandbox) watchSandbox(ctx context.Context) {
	a, err := s.api(ctx)
	if err != nil {
		s.p.log.Debug("watch sandbox", "pod", s.pod, "err", err)
		return
	}
	podSel := fields.OneTermEqualSelector("metadata.name", s.pod).String()
	pods := a.kube.CoreV1().Pods(s.ns)
	podLW := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = podSel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = podSel
			return pods.Watch(ctx, o)
		},
	}
	claimLW, claimType := a.claimWatch(s.ns, fields.OneTermEqualSelector("metadata.name", s.claim).String(), func(err error) error { return err })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	whys := make(chan string, 2)
	go func() {
		whys <- follow(ctx, s.p.log, cache.ToListWatcherWithWatchListSemantics(podLW, a.kube), &corev1.Pod{}, s.ns+"/"+s.pod, "pod "+s.pod, func(o runtime.Object) string {
			if pod, ok := o.(*corev1.Pod); ok {
				return s.podGone(pod)
			}
			return ""
		})
	}()
	go func() {
		whys <- follow(ctx, s.p.log, claimLW, claimType, s.ns+"/"+s.claim, "claim "+s.claim, s.claimGone)
	}()
	for range 2 {
		if why := <-whys; why != "" {
			s.setGone(why)
			return
		}
	}
}

// claimGone says why a claim object no longer holds this sandbox, or "".
func (s *Sandbox) claimGone(o runtime.Object) string {
	u, ok := asClaim(o)
	switch {
	case !ok || u.GetName() != s.claim:
		return ""
	case u.GetDeletionTimestamp() != nil:
		return "claim " + s.claim + " is being deleted (expired or released)"
	case s.uid != "" && string(u.GetUID()) != s.uid:
		return "claim " + s.claim + " was replaced by another of the same name"
	}
	return ""
}

// follow watches the one object at key until it is deleted or gone says
// why it cannot serve, and returns why; "" when ctx ends first.
func follow(ctx context.Context, log *slog.Logger, lw cache.ListerWatcher, objType runtime.Object, key, what string, gone func(runtime.Object) string) string {
	var why string
	_, err := watchtools.UntilWithSync(ctx, lw, objType,
		func(store cache.Store) (bool, error) {
			obj, exists, err := store.GetByKey(key)
			if err != nil {
				return false, err
			}
			if !exists {
				why = what + " was deleted"
				return true, nil
			}
			if o, ok := obj.(runtime.Object); ok {
				why = gone(o)
			}
			return why != "", nil
		},
		func(ev watch.Event) (bool, error) {
			switch ev.Type {
			case watch.Deleted:
				why = what + " was deleted"
			case watch.Added, watch.Modified:
				why = gone(ev.Object)
			}
			return why != "", nil
		})
	if err != nil && ctx.Err() == nil {
		// Not a sign that the object is gone (a precondition's store
		// error): the other watch, and each exec's own checks, go on.
		log.Debug("watch ended", "what", what, "err", err)
		return ""
	}
	return why
}

// ensureWatch starts watchSandbox once, until closeMux stops it.
func (s *Sandbox) ensureWatch() {
	s.muxMu.Lock()
	defer s.muxMu.Unlock()
	s.ensureWatchLocked()
}

// ensureWatchLocked is ensureWatch with muxMu held.
func (s *Sandbox) ensureWatchLocked() {
	if s.stopWatch != nil || s.goneReason() != "" {
		return
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	go s.watchSandbox(wctx)
}

// setGone records why the pod can no longer serve and ends the helper's
// exec.
func (s *Sandbox) setGone(why string) {
	s.mu.Lock()
	if s.gone == "" {
		s.gone = why
	}
	s.mu.Unlock()
	s.p.log.Info("sandbox lost", "claim", s.claim, "why", why)
	s.closeMux()
}

// goneReason is why the watch found the pod gone, or "".
func (s *Sandbox) goneReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}
