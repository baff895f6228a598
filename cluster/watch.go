package cluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// watchPod follows the sandbox's pod while the helper's exec is up. A pod
// deleted in the API can keep running on its node for a while, and
// commands on a live exec would still reach it; so when the watch sees the
// pod deleted, being deleted, stopped, or given to another claim, it marks
// the sandbox gone and ends the exec: the command in flight and every later
// one report the sandbox lost, as an exec of their own against a pod that no
// longer exists would.
func (s *Sandbox) watchPod(ctx context.Context) {
	a, err := s.api(ctx)
	if err != nil {
		s.p.log.Debug("watch pod", "pod", s.pod, "err", err)
		return
	}
	pods := a.kube.CoreV1().Pods(s.ns)
	sel := fields.OneTermEqualSelector("metadata.name", s.pod).String()
	backoff := time.Second
	retry := func(err error) bool {
		s.p.log.Debug("watch pod", "pod", s.pod, "err", err, "retry in", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		return true
	}
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if !retry(err) {
				return
			}
			continue
		}
		if len(list.Items) == 0 {
			s.setGone("pod " + s.pod + " was deleted")
			return
		}
		if why := s.podGone(&list.Items[0]); why != "" {
			s.setGone(why)
			return
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			if !retry(err) {
				return
			}
			continue
		}
		backoff = time.Second
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				s.setGone("pod " + s.pod + " was deleted")
				return
			case watch.Added, watch.Modified:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					if why := s.podGone(pod); why != "" {
						w.Stop()
						s.setGone(why)
						return
					}
				}
			}
			// Bookmarks move on; an error event ends the channel and the
			// watch starts again from a list.
		}
		w.Stop()
	}
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
