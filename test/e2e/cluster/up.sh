#!/usr/bin/env bash
# Boot a single-node Kubernetes cluster with agent-sandbox on this machine, from what build.sh left in
# $LAB: containerd (Debian) -> certs -> etcd -> kube-apiserver -> controller-manager -> scheduler ->
# kubelet -> agent-sandbox CRDs + controller. Every server listens on 127.0.0.1 only; the pod network is
# an isolated bridge with no route off the machine. Every daemon's PID goes to $LAB/run/<name>.pid, which
# is what down.sh stops. Writes $LAB/etc/admin.kubeconfig (system:masters) for the harness only.
#
#   AS_VERSION=v0.1.1 (default)  agent-sandbox v0.1.1: every CRD serves v1alpha1 only
#   AS_VERSION=v0.5.6            agent-sandbox v0.5.6: CRDs serve v1beta1 (storage, preferred) and v1alpha1,
#                                converted by the controller's webhook on 127.0.0.1:9443
#   AS_SERVE=v1beta1             (with v0.5.6) v1alpha1 is not served, as agent-sandbox v1.0 serves
# containerd always has two CRI handlers: runc (default) and runsc (gVisor, from build.sh); RuntimeClass
# `gvisor` selects the latter.
#
# Machine quirks handled here (see docs/cluster.md, "The e2e cluster"):
#  - no CAP_SYS_RESOURCE: containerd restrict_oom_score_adj=true, else runc fails every pod;
#  - cgroup v1: kubelet failCgroupV1=false;
#  - controller-manager needs --use-service-account-credentials, else the node keeps its not-ready taint;
#  - /run/netns is made a shared mount up front so a later `ip netns add` cannot hide pod netns mounts.
set -euo pipefail
LAB=${LAB:-/var/tmp/sbx-cluster-lab}
BIN=$LAB/bin P=$LAB/pki E=$LAB/etc L=$LAB/logs R=$LAB/run D=$LAB/data
mkdir -p "$P" "$E" "$L" "$R" "$D/etcd" "$D/kubelet" "$D/pod-logs" "$LAB/cni/net.d" "$LAB/containerd"
AS_VERSION=${AS_VERSION:-v0.1.1} AS_SERVE=${AS_SERVE:-all}
case "$AS_VERSION/$AS_SERVE" in
v0.1.1/all) AS_BIN=$BIN/agent-sandbox-controller AS_MAN=$LAB/manifests/agent-sandbox ;;
v0.5.6/all | v0.5.6/v1beta1) AS_BIN=$BIN/agent-sandbox-controller-v0.5.6 AS_MAN=$LAB/manifests/agent-sandbox-v0.5.6 ;;
*) echo "up: AS_VERSION=$AS_VERSION AS_SERVE=$AS_SERVE: want v0.1.1/all, v0.5.6/all or v0.5.6/v1beta1" >&2; exit 2 ;;
esac
[ -x "$AS_BIN" ] || { echo "up: $AS_BIN is missing: run test/e2e/cluster/build.sh first" >&2; exit 1; }
T0=$(date +%s%N)
say() { printf '%s up: +%sms %s\n' "$(date +%T)" "$(( ($(date +%s%N) - T0) / 1000000 ))" "$*"; }

running() { [ -f "$R/$1.pid" ] && kill -0 "$(cat "$R/$1.pid")" 2>/dev/null; }

# start <name> <cmd...>: run a daemon in the background, log to $L/<name>.log, record its PID.
start() {
	local n=$1
	shift
	if running "$n"; then say "$n already running"; return; fi
	nohup "$@" >"$L/$n.log" 2>&1 &
	echo $! >"$R/$n.pid"
}

# wait_for <what> <seconds> <cmd...>
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 5; i++)); do
		if "$@" >/dev/null 2>&1; then say "$what"; return 0; fi
		sleep 0.2
	done
	echo "up: timed out after ${secs}s waiting for: $what" >&2
	return 1
}

certs() {
	[ -f "$P/ca.crt" ] && return
	(
		cd "$P"
		openssl genrsa -out ca.key 2048 2>/dev/null
		openssl req -x509 -new -nodes -key ca.key -subj "/CN=sbx-e2e-ca" -days 3650 -out ca.crt
		local client="basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
		cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1"
		cert admin "/O=system:masters/CN=sbx-e2e-admin" "$client"
		cert kubelet "/O=system:nodes/CN=system:node:localhost" "$client"
		cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
		cert controller-manager "/CN=system:kube-controller-manager" "$client"
		cert scheduler "/CN=system:kube-scheduler" "$client"
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
	for u in admin kubelet controller-manager scheduler; do kubeconfig "$u"; done
	say "certificates"
}

# webhook_cert: the serving certificate of agent-sandbox v0.5.6's conversion webhook (127.0.0.1 only).
webhook_cert() {
	[ -f "$P/webhook/tls.crt" ] && return
	mkdir -p "$P/webhook"
	(cd "$P" && cert webhook "/CN=agent-sandbox-webhook" "basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1")
	mv "$P/webhook.crt" "$P/webhook/tls.crt"
	mv "$P/webhook.key" "$P/webhook/tls.key"
}

# cert <name> <subject> <extensions>: a key and a certificate signed by the lab CA (run in $P).
cert() {
	openssl genrsa -out "$1.key" 2048 2>/dev/null
	openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
	printf '%s\n' "$3" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out "$1.crt" -extfile "$1.ext" 2>/dev/null
	rm -f "$1.csr"
}

kubeconfig() {
	cat >"$E/$1.kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: sbx-e2e
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$P/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$P/$1.crt", client-key: "$P/$1.key"}
contexts:
- name: sbx-e2e
  context: {cluster: sbx-e2e, user: $1}
current-context: sbx-e2e
EOK
}

containerd_up() {
	cat >"$E/containerd.toml" <<EOC
version = 2
root = "$LAB/containerd/root"
state = "$LAB/containerd/state"
[grpc]
  address = "$R/containerd.sock"
[ttrpc]
  address = "$R/containerd.sock.ttrpc"
[debug]
  address = "$R/containerd-debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "lab.local/pause:v1"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$R/runc-root"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$E/runsc.toml"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$LAB/cni/net.d"
EOC
	# runsc's platform: systrap (ptrace also works here; kvm hangs in this VM)
	cat >"$E/runsc.toml" <<EOR
binary_name = "$BIN/runsc"
root = "$R/runsc-root"
[runsc_config]
  platform = "${RUNSC_PLATFORM:-systrap}"
EOR
	# containerd finds a runtime's shim as containerd-shim-<name>-<version> on its PATH
	export PATH=$BIN:$PATH
	mkdir -p /run/netns
	mountpoint -q /run/netns || mount --bind /run/netns /run/netns
	mount --make-shared /run/netns
	start containerd /usr/bin/containerd --config "$E/containerd.toml"
	wait_for "containerd" 20 ctr --address "$R/containerd.sock" version
	local t
	for t in "$LAB"/images/*.tar; do
		ctr --address "$R/containerd.sock" -n k8s.io images import "$t" >/dev/null
	done
	say "images imported"
}

control_plane_up() {
	cat >"$LAB/cni/net.d/10-sbx-e2e.conflist" <<EOC
{"cniVersion": "0.4.0", "name": "sbx-e2e", "plugins": [
  {"type": "bridge", "bridge": "labbr0", "isGateway": false, "ipMasq": false, "hairpinMode": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "dataDir": "$D/cni-ipam"}},
  {"type": "loopback"}]}
EOC
	ETCD_UNSUPPORTED_ARCH='' start etcd /usr/bin/etcd --name sbx-e2e --data-dir "$D/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster sbx-e2e=http://127.0.0.1:2380
	wait_for "etcd" 30 curl -sf http://127.0.0.1:2379/health
	start kube-apiserver "$BIN/kube-apiserver" \
		--bind-address=127.0.0.1 --secure-port=6443 --advertise-address=127.0.0.1 \
		--etcd-servers=http://127.0.0.1:2379 \
		--client-ca-file="$P/ca.crt" --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
		--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=Hostname,InternalIP \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16 --endpoint-reconciler-type=none \
		--authorization-mode=Node,RBAC --allow-privileged=true --profiling=false
	wait_for "kube-apiserver" 120 curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" https://127.0.0.1:6443/readyz
	start kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig="$E/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$E/controller-manager.kubeconfig" --authorization-kubeconfig="$E/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
		--service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
		--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" --profiling=false
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig="$E/scheduler.kubeconfig" \
		--authentication-kubeconfig="$E/scheduler.kubeconfig" --authorization-kubeconfig="$E/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false --profiling=false
	# the kubelet changes three sysctls (protectKernelDefaults=false); down.sh puts them back
	[ -f "$R/sysctl-before.txt" ] || sysctl vm.overcommit_memory kernel.panic kernel.panic_on_oops >"$R/sysctl-before.txt"
	cat >"$E/kubelet-config.yaml" <<EOK
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: "$P/ca.crt"}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$R/containerd.sock
podLogsDir: $D/pod-logs
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
protectKernelDefaults: false
EOK
	start kubelet "$BIN/kubelet" --config="$E/kubelet-config.yaml" --kubeconfig="$E/kubelet.kubeconfig" \
		--hostname-override=localhost --root-dir="$D/kubelet" --cert-dir="$D/kubelet/pki" --v=1
	local k=("$BIN/kubectl" --kubeconfig "$E/admin.kubeconfig")
	wait_for "node Ready" 120 sh -c "\"\$0\" --kubeconfig \"\$1\" get node localhost -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" "$BIN/kubectl" "$E/admin.kubeconfig"
	wait_for "default service account" 60 "${k[@]}" get sa default -n default
}

agent_sandbox_up() {
	local k=("$BIN/kubectl" --kubeconfig "$E/admin.kubeconfig") crd flags=()
	"${k[@]}" apply --server-side -f "$AS_MAN/" >/dev/null
	if [ "$AS_VERSION" = v0.5.6 ]; then
		# The stock CRDs call the webhook through a Service in agent-sandbox-system; here the controller
		# runs on the host, so the apiserver calls it at 127.0.0.1:9443 with the lab CA.
		webhook_cert
		local ca; ca=$(base64 -w0 <"$P/ca.crt")
		for crd in sandboxes.agents.x-k8s.io sandboxclaims.extensions.agents.x-k8s.io \
			sandboxtemplates.extensions.agents.x-k8s.io sandboxwarmpools.extensions.agents.x-k8s.io; do
			local patch='{"op":"replace","path":"/spec/conversion/webhook/clientConfig","value":{"url":"https://127.0.0.1:9443/convert","caBundle":"'$ca'"}}'
			# v1.0 serves v1beta1 only: stop serving v1alpha1 (versions[1] is v1alpha1 in v0.5.6's CRDs)
			[ "$AS_SERVE" = v1beta1 ] &&
				patch=$patch',{"op":"test","path":"/spec/versions/1/name","value":"v1alpha1"},{"op":"replace","path":"/spec/versions/1/served","value":false}'
			"${k[@]}" patch crd "$crd" --type=json -p "[$patch]" >/dev/null
		done
		flags=(--manage-webhook-certs=false --webhook-cert-dir="$P/webhook" --webhook-port=9443)
	fi
	"${k[@]}" wait --for=condition=Established crd --all --timeout=60s >/dev/null
	KUBECONFIG=$E/admin.kubeconfig start agent-sandbox-controller "$AS_BIN" --extensions \
		--metrics-bind-address=127.0.0.1:18080 --health-probe-bind-address=127.0.0.1:18081 --leader-elect=false "${flags[@]}"
	wait_for "agent-sandbox controller $AS_VERSION (served: $AS_SERVE)" 60 curl -sf http://127.0.0.1:18081/readyz
	if [ "$AS_VERSION" = v0.5.6 ]; then
		wait_for "conversion webhook" 30 curl -sf --cacert "$P/ca.crt" -o /dev/null -X POST -H 'Content-Type: application/json' \
			-d '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"extensions.agents.x-k8s.io/v1beta1","objects":[]}}' \
			https://127.0.0.1:9443/convert
	fi
	# pods of a pool rendered with RuntimeClass gvisor run under runsc
	printf 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n' |
		"${k[@]}" apply --server-side -f - >/dev/null
}

certs
containerd_up
control_plane_up
agent_sandbox_up
say "cluster up: KUBECONFIG=$E/admin.kubeconfig"
