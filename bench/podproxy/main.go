// Command podproxy measures, on a cluster, what each way of reaching a
// process already running in a pod costs per request, for issue 15's item 4
// (claim to first exec at most 1.5x the create-and-watch floor): a
// pods/exec of `true` (what the first command of a claim needs today, the
// mux's exec), a pods/log read (how a per-pod secret a helper printed at
// its start would be read), and a pods/proxy GET to a server listening in
// the pod (the way with no exec, which needs the API server to reach the
// pod's IP). It makes one pod (image with busybox's httpd, the runtime
// class given), times the three interleaved, prints medians and p90s, and
// deletes the pod.
//
//	go run ./bench/podproxy -kubeconfig /var/tmp/sbx-cluster-lab/etc/admin.kubeconfig \
//	    -image lab.local/busybox:v1 -runtime gvisor -n 50
//
// On the e2e lab (test/e2e/cluster/up.sh) the pod bridge has no address on
// the host, on purpose, so pods/proxy cannot reach a pod until the bridge
// is given one and the host is shielded from the pods (docs/benchmarks-
// cluster.md, K29, has the commands and the figures).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "serve" {
		serve(os.Args[2]) // in the pod (uploaded by run)
		return
	}
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	ns := flag.String("namespace", "default", "namespace of the probe pod")
	image := flag.String("image", "", "an image with busybox (httpd, sh, true) (required)")
	runtime := flag.String("runtime", "", "RuntimeClass of the pod (empty: the node's default)")
	n := flag.Int("n", 50, "timed requests of each kind")
	shielded := flag.String("shielded", "", "host:port of a listener on this machine that the pod must not reach (checked with wget from the pod)")
	flag.Parse()
	if *kubeconfig == "" || *image == "" {
		fmt.Fprintln(os.Stderr, "podproxy: -kubeconfig and -image are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *ns, *image, *runtime, *shielded, *n); err != nil {
		fmt.Fprintln(os.Stderr, "podproxy:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, ns, image, runtime, shielded string, n int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	// As the cluster backend (cluster/config.go): client-go's default
	// limiter (5 requests a second) would time itself, not the requests.
	cfg.QPS, cfg.Burst = 50, 100
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := "sbx-podproxy-" + rand.String(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			AutomountServiceAccountToken:  new(bool),
			Containers: []corev1.Container{{
				Name: "probe", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", probeScript},
				Ports:   []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 8081}},
			}},
		},
	}
	if runtime != "" {
		pod.Spec.RuntimeClassName = &runtime
	}
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the probe pod: %w", err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := kc.CoreV1().Pods(ns).Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			fmt.Fprintln(os.Stderr, "podproxy: delete the probe pod:", err)
		}
	}()
	ip, err := waitReady(ctx, kc, ns, name)
	if err != nil {
		return err
	}
	rc := kc.CoreV1().RESTClient()
	// This program, uploaded into the pod and started there: a Go server
	// that answers an upgrade and echoes, as a helper listening in the pod
	// would (Go sets TCP_NODELAY; busybox's nc does not, and under gVisor
	// its small writes wait for the other side's delayed ACK).
	if err := startServer(ctx, cfg, rc, ns, name); err != nil {
		return err
	}
	if shielded != "" {
		// The host is shielded from the pods: a connection from the pod
		// to a listener of the host's fails.
		req := rc.Post().Namespace(ns).Resource("pods").Name(name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: []string{"/bin/sh", "-c", "if echo | nc -w 3 " + strings.Replace(shielded, ":", " ", 1) + "; then echo CONNECTED; else echo not connected; fi"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ex, err := executor(cfg, req.URL())
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
			return fmt.Errorf("check %s from the pod: %w: %s", shielded, err, out.Bytes())
		}
		if bytes.Contains(out.Bytes(), []byte("CONNECTED")) {
			return fmt.Errorf("the pod reached %s on the host: %.200q", shielded, out.Bytes())
		}
		fmt.Printf("from the pod, %s on the host: not reached (%s)\n", shielded, bytes.TrimSpace(out.Bytes()))
	}
	proxy := func() error {
		b, err := rc.Get().Namespace(ns).Resource("pods").Name(name + ":8080").SubResource("proxy").Suffix("i").DoRaw(ctx)
		if err == nil && !bytes.Equal(b, []byte("ok\n")) {
			err = fmt.Errorf("proxy: got %q", b)
		}
		return err
	}
	logs := func() error {
		lim := int64(64)
		b, err := kc.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{LimitBytes: &lim}).DoRaw(ctx)
		if err == nil && !bytes.HasPrefix(b, []byte("secret-line")) {
			err = fmt.Errorf("log: got %q", b)
		}
		return err
	}
	execTrue := func() error {
		req := rc.Post().Namespace(ns).Resource("pods").Name(name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ex, err := executor(cfg, req.URL())
		if err != nil {
			return err
		}
		var out bytes.Buffer
		return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	}
	direct := func() error { // the network alone: a new connection from here to the pod
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		resp, err := c.Get("http://" + net.JoinHostPort(ip, "8080") + "/i")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && !bytes.Equal(b, []byte("ok\n")) {
			err = fmt.Errorf("direct: got %q", b)
		}
		return err
	}
	upgrade := func() error { // the first command's stream through a listening helper
		return upgradeEcho(ctx, cfg, ns, name, "8081")
	}
	parts := []struct {
		name string
		f    func() error
		ds   []time.Duration
	}{
		{name: "pods/exec `true`", f: execTrue},
		{name: "pods/log, the first 64 bytes", f: logs},
		{name: "pods/proxy GET to httpd in the pod", f: proxy},
		{name: "a GET from this host to the pod's IP, new connection (no API server)", f: direct},
		{name: "pods/proxy upgrade on a new connection, then a line echoed on the stream (busybox nc)", f: upgrade},
		{name: "the same to a Go server in the pod (this program, uploaded)", f: func() error { return upgradeEcho(ctx, cfg, ns, name, "8082") }},
	}
	for i := range n + 3 {
		for k := range parts {
			start := time.Now()
			if err := parts[k].f(); err != nil {
				return fmt.Errorf("%s: %w", parts[k].name, err)
			}
			if i >= 3 {
				parts[k].ds = append(parts[k].ds, time.Since(start))
			}
		}
	}
	fmt.Printf("runtime %q, %d requests each, interleaved\n\n| request | median | p90 |\n|---|---|---|\n", runtime, n)
	for _, p := range parts {
		slices.Sort(p.ds)
		fmt.Printf("| %s | %.1f ms | %.1f ms |\n", p.name, ms(p.ds[len(p.ds)/2]), ms(p.ds[len(p.ds)*9/10]))
	}
	return nil
}

// probeScript is the pod's: httpd on 8080 (a file "ok"), and on 8081 a
// server that answers a connection with 101 Switching Protocols and then
// echoes what it receives (the request's header, then the stream), after a
// first log line. Its processes are started before each connection comes
// (nc, one connection at a time), as a helper listening in the pod is
// running before it: no process starts on the timed path.
const probeScript = `mkdir -p /tmp/w && echo ok > /tmp/w/i && mkfifo /tmp/f
while :; do { printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: sbx-probe\r\nConnection: Upgrade\r\n\r\n'; cat /tmp/f; } | nc -l -p 8081 >/tmp/f; done &
echo secret-line
exec httpd -f -p 8080 -h /tmp/w`

// upgradeEcho opens a new HTTP/1.1 connection to the API server, asks for
// an upgrade of pods/proxy to port 8081 of the pod, and once switched sends
// a line and reads it back: what a host would do to reach a helper that
// listens in the pod, for a claim's first command, instead of a pods/exec.
func upgradeEcho(ctx context.Context, cfg *rest.Config, ns, name, port string) error {
	tc, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return err
	}
	if tc == nil {
		return fmt.Errorf("upgrade: the kubeconfig's server is not https")
	}
	tc = tc.Clone()
	tc.NextProtos = []string{"http/1.1"}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return err
	}
	d := tls.Dialer{Config: tc}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := fmt.Sprintf("GET /api/v1/namespaces/%s/pods/%s:%s/proxy/ HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: sbx-probe\r\n", ns, name, port, u.Host)
	if cfg.BearerToken != "" {
		req += "Authorization: Bearer " + cfg.BearerToken + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("upgrade: %s: %s", resp.Status, b)
	}
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		return err
	}
	// The echo gives back the request's header first.
	for range 64 {
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("upgrade: read the echo: %w", err)
		}
		if line == "ping\n" {
			return nil
		}
	}
	return fmt.Errorf("upgrade: no echo of the line")
}

// startServer uploads this program into the pod over pods/exec and starts
// it there as the upgrade server on port 8082, waiting until it answers.
func startServer(ctx context.Context, cfg *rest.Config, rc rest.Interface, ns, name string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := os.Open(self)
	if err != nil {
		return err
	}
	defer bin.Close()
	run := func(stdin io.Reader, argv ...string) error {
		req := rc.Post().Namespace(ns).Resource("pods").Name(name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		ex, err := executor(cfg, req.URL())
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &out}); err != nil {
			return fmt.Errorf("%v: %w: %s", argv, err, out.Bytes())
		}
		return nil
	}
	if err := run(bin, "/bin/sh", "-c", "cat > /tmp/srv && chmod 755 /tmp/srv"); err != nil {
		return fmt.Errorf("upload the server (build this program with CGO_ENABLED=0): %w", err)
	}
	if err := run(nil, "/bin/sh", "-c", "setsid /tmp/srv serve 8082 </dev/null >/dev/null 2>&1 &"); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := upgradeEcho(ctx, cfg, ns, name, "8082")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the uploaded server did not answer in a minute: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serve is the in-pod side: each connection's request header is read, 101
// answered, and the rest echoed.
func serve(port string) {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: sbx-probe\r\nConnection: Upgrade\r\n\r\n")
			io.Copy(c, br)
		}()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// executor speaks the WebSocket streaming protocol, falling back to SPDY, as
// the cluster backend does (cluster/exec.go, streamExec).
func executor(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// waitReady waits until the pod reports Ready, from a watch, and returns
// its IP.
func waitReady(ctx context.Context, kc kubernetes.Interface, ns, name string) (string, error) {
	w, err := kc.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return "", err
	}
	defer w.Stop()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", fmt.Errorf("the watch of pod %s ended before it was Ready", name)
			}
			if ev.Type == watch.Error {
				return "", fmt.Errorf("watch pod %s: %v", name, ev.Object)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return "", fmt.Errorf("pod %s ended (%s) before it was Ready", name, p.Status.Phase)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return p.Status.PodIP, nil
				}
			}
		case <-deadline:
			return "", fmt.Errorf("pod %s not Ready in 3 minutes", name)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
