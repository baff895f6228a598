#!/usr/bin/env bash
# Debian packages the e2e cluster needs (installs only what is missing).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for p in containerd runc containernetworking-plugins etcd-server busybox-static openssl curl iproute2 shellcheck; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ -z "$(find /var/lib/apt/lists -name '*Packages*' -newermt '-1 day' 2>/dev/null | head -1)" ]; then
	apt-get update -qq
fi
apt-get install -y -qq "${need[@]}"
