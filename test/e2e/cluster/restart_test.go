//go:build e2e

package clustere2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sbx-sh/sbx/cluster"
	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/sandbox"
)

// TestContainerRestartMidCommand: the pod stays but its container ends and
// the kubelet starts it again (here its idle loop is told to exit; in the
// bench, under gVisor, an OOM kill did it). The command in flight and the
// helper died with the container, and the file system is a new one: the
// command in flight must end with ErrLost, not hang, and no later command
// may run as if this were still the session's sandbox.
func TestContainerRestartMidCommand(t *testing.T) {
	p := cluster.New(saCfg(t), nil)
	sb := claim(t, p, "restart")
	run(t, sb, &sandbox.Cmd{Argv: []string{"true"}})
	pod, err := admin.CoreV1().Pods(ns).Get(context.Background(), sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restarts := pod.Status.ContainerStatuses[0].RestartCount
	running := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"sh", "-c", "echo started; exec sleep 300"},
			Stdout: writerFunc(func(p []byte) (int, error) { once.Do(func() { close(running) }); return len(p), nil })})
		done <- err
	}()
	select {
	case <-running:
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not start within 60s")
	}
	// The container's init (the pool's idle loop) exits 0 on SIGTERM.
	// The kill's own exec may die with the container before it answers.
	if r, err := sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"kill", "-TERM", "1"}}); err == nil && r.ExitCode != 0 {
		t.Fatalf("kill -TERM 1: exit %d", r.ExitCode)
	} else if err != nil && !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("kill -TERM 1: %v", err)
	}
	if !testenv.WaitEvery(60*time.Second, 200*time.Millisecond, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(context.Background(), sb.Pod(), metav1.GetOptions{})
		return err == nil && p.Status.ContainerStatuses[0].RestartCount > restarts
	}) {
		t.Fatalf("the container of pod %s did not restart within 60s", sb.Pod())
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrLost) {
			t.Errorf("the command in flight when the container restarted: %v, want ErrLost", err)
		} else {
			t.Logf("in flight: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the command in flight when the container restarted has not returned 60s after the restart")
	}
	_, err = sb.Exec(context.Background(), &sandbox.Cmd{Argv: []string{"true"}})
	if !errors.Is(err, sandbox.ErrLost) {
		t.Errorf("a command after the container restarted: %v, want ErrLost", err)
	} else {
		t.Logf("next: %v", err)
	}
}
