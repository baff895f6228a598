#!/bin/sh
# Install gVisor (runsc + containerd-shim-runsc-v1) on a k3s node and register the "runsc" runtime
# handler with k3s's containerd, for the RuntimeClass in ../runtimeclass.yaml.
# UNTESTED on the machine this was written on (no k3s there); shellcheck-clean.
#
#   ./gvisor.sh                      # latest release from https://storage.googleapis.com/gvisor
#   GVISOR_RELEASE=20250901 ./gvisor.sh
#   PLATFORM=kvm ./gvisor.sh         # default systrap; kvm where /dev/kvm works
set -eu
RELEASE=${GVISOR_RELEASE:-latest}
PLATFORM=${PLATFORM:-systrap}
ARCH=$(uname -m)
URL=https://storage.googleapis.com/gvisor/releases/release/$RELEASE/$ARCH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in runsc containerd-shim-runsc-v1; do
	curl -sfL "$URL/$f" -o "$tmp/$f"
	curl -sfL "$URL/$f.sha512" -o "$tmp/$f.sha512"
	(cd "$tmp" && sha512sum -c "$f.sha512")
	install -m 0755 "$tmp/$f" /usr/local/bin/$f
done
mkdir -p /etc/containerd
cat >/etc/containerd/runsc.toml <<EOC
[runsc_config]
  platform = "$PLATFORM"
EOC
# k3s renders its containerd config from this template when present; keep k3s's defaults and add runsc.
T=/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl
mkdir -p "$(dirname "$T")"
if [ ! -f "$T" ]; then
	cat >"$T" <<'EOC'
{{ template "base" . }}

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
  runtime_type = "io.containerd.runsc.v1"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
  TypeUrl = "io.containerd.runsc.v1.options"
  ConfigPath = "/etc/containerd/runsc.toml"
EOC
fi
if systemctl is-active -q k3s; then systemctl restart k3s; elif systemctl is-active -q k3s-agent; then systemctl restart k3s-agent; fi
/usr/local/bin/runsc --version
echo "gVisor installed (platform $PLATFORM); apply cluster/deploy/runtimeclass.yaml once per cluster"
