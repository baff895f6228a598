#!/bin/sh
# Install a k3s server node for sbx sandboxes, with a memory budget for pods.
# UNTESTED on the machine this was written on (k3s cannot be downloaded there); shellcheck-clean.
#
#   POD_MEMORY=48Gi ./k3s-server.sh            # first server
#   K3S_VERSION=v1.33.4+k3s1 POD_MEMORY=48Gi ./k3s-server.sh
#
# POD_MEMORY is what all pods together may use: the rest of the node's memory is reserved for the
# system and for k3s (kubelet --system-reserved), and pods are evicted before the node runs out.
# Then, on the server: ./gvisor.sh; kubectl apply -f ../runtimeclass.yaml -f ../rbac.yaml;
# install agent-sandbox (CRDs + controller with --extensions); sbx pool render ... | kubectl apply -f -
set -eu
: "${POD_MEMORY:?set POD_MEMORY, e.g. 48Gi: the memory all pods together may use}"
K3S_VERSION=${K3S_VERSION:-}

total_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
pods_kib=$(numfmt --from=iec-i --to-unit=1024 "$POD_MEMORY" 2>/dev/null || numfmt --from=iec --to-unit=1024 "${POD_MEMORY%i}")
reserved_kib=$((total_kib - pods_kib))
if [ "$reserved_kib" -lt 1048576 ]; then
	echo "k3s-server: POD_MEMORY=$POD_MEMORY leaves less than 1 GiB of $((total_kib / 1048576)) GiB for the system" >&2
	exit 1
fi

mkdir -p /etc/rancher/k3s
cat >/etc/rancher/k3s/config.yaml <<EOC
write-kubeconfig-mode: "0600"
disable:
  - traefik
  - servicelb
kubelet-arg:
  - "system-reserved=memory=${reserved_kib}Ki"
  - "eviction-hard=memory.available<256Mi"
  - "enforce-node-allocatable=pods"
EOC

# The official installer (https://get.k3s.io) verifies the binary's checksum.
curl -sfL https://get.k3s.io -o /tmp/k3s-install.sh
INSTALL_K3S_VERSION=$K3S_VERSION INSTALL_K3S_EXEC=server sh /tmp/k3s-install.sh
echo "k3s server installed; pods may use $POD_MEMORY. Join token: /var/lib/rancher/k3s/server/node-token"
