#!/usr/bin/env bash
# Debian packages the tests need (installs only what is missing). With no
# arguments: what the e2e cluster needs. Arguments name more packages.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for p in containerd runc containernetworking-plugins etcd-server busybox-static openssl curl iproute2 shellcheck "$@"; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
echo "debs: installing ${need[*]}" >&2
if [ -z "$(find /var/lib/apt/lists -name '*Packages*' -newermt '-1 day' 2>/dev/null | head -1)" ]; then
	apt-get update -qq
fi
apt-get install -y -qq "${need[@]}"
