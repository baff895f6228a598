#!/bin/sh
# Join a k3s agent node (runs sandboxes) to a server, with a memory budget for pods.
# UNTESTED on the machine this was written on (k3s cannot be downloaded there); shellcheck-clean.
#
#   K3S_URL=https://server:6443 K3S_TOKEN=... POD_MEMORY=56Gi ./k3s-agent.sh
#
# Then run ./gvisor.sh on this node too, and ./cache.sh add <tenant> for each tenant scheduled here.
set -eu
: "${K3S_URL:?set K3S_URL to the server, e.g. https://10.0.0.1:6443}"
: "${K3S_TOKEN:?set K3S_TOKEN to /var/lib/rancher/k3s/server/node-token of the server}"
: "${POD_MEMORY:?set POD_MEMORY, e.g. 56Gi: the memory all pods together may use}"

total_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
pods_kib=$(numfmt --from=iec-i --to-unit=1024 "$POD_MEMORY" 2>/dev/null || numfmt --from=iec --to-unit=1024 "${POD_MEMORY%i}")
reserved_kib=$((total_kib - pods_kib))
if [ "$reserved_kib" -lt 524288 ]; then
	echo "k3s-agent: POD_MEMORY=$POD_MEMORY leaves less than 512 MiB for the system" >&2
	exit 1
fi
mkdir -p /etc/rancher/k3s
cat >/etc/rancher/k3s/config.yaml <<EOC
kubelet-arg:
  - "system-reserved=memory=${reserved_kib}Ki"
  - "eviction-hard=memory.available<256Mi"
  - "enforce-node-allocatable=pods"
EOC
curl -sfL https://get.k3s.io -o /tmp/k3s-install.sh
K3S_URL=$K3S_URL K3S_TOKEN=$K3S_TOKEN INSTALL_K3S_VERSION=${K3S_VERSION:-} INSTALL_K3S_EXEC=agent sh /tmp/k3s-install.sh
echo "k3s agent joined $K3S_URL; pods may use $POD_MEMORY"
