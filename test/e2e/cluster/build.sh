#!/usr/bin/env bash
# Build (or reuse) everything the e2e cluster needs, from the Go module proxy and Debian only:
#   kube-apiserver, kubelet, kube-scheduler, kube-controller-manager, kubectl  (build/k8s/go.mod)
#   agent-sandbox-controller v0.1.1 + its CRDs                                (build/agent-sandbox/go.mod)
#   agent-sandbox-controller-v0.5.6 + its CRDs                                (build/agent-sandbox-v0.5.6/go.mod)
#   runsc + containerd-shim-runsc-v1 (gVisor)                                 (build/gvisor/go.mod)
#   two OCI image tarballs with no registry: lab.local/busybox:v1, lab.local/pause:v1
# Output goes to $LAB (default /var/tmp/sbx-cluster-lab). A binary is rebuilt only when its pinned
# go.mod changed (stamp file next to it) or FORCE=1. Cold: ~16 min on 2 cores; warm: seconds.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LAB=${LAB:-/var/tmp/sbx-cluster-lab}
export PATH=/usr/local/go/bin:$PATH GOFLAGS=-buildvcs=false
mkdir -p "$LAB/bin" "$LAB/build" "$LAB/manifests/agent-sandbox" "$LAB/images" "$LAB/logs"

log() { printf '%s build: %s\n' "$(date +%T)" "$*"; }

# stamp <dir>: a digest of the pinned module files, so a version bump rebuilds.
stamp() { cat "$1/go.mod" "$1/tools.go" | sha256sum | cut -c1-16; }

# prepare <name>: copy the pinned module into $LAB/build/<name> and resolve its dependencies there
# (never in the sbx module). A go.sum checked in next to go.mod is used as is.
prepare() {
	local src=$HERE/build/$1 dst=$LAB/build/$1
	mkdir -p "$dst"
	cp "$src/go.mod" "$src/tools.go" "$dst/"
	[ -f "$src/go.sum" ] && cp "$src/go.sum" "$dst/"
	(cd "$dst" && go mod tidy -e 2>&1 | grep -v '^go: downloading' | tail -5) || true
}

build_k8s() {
	local v=v1.37.2 maj=1 min=37 ld="" want c
	want=$(stamp "$HERE/build/k8s")
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld="$ld -X $pkg.gitVersion=$v -X $pkg.gitMajor=$maj -X $pkg.gitMinor=$min -X $pkg.gitTreeState=clean"
	done
	local prepared=""
	for c in kube-apiserver kubelet kubectl kube-scheduler kube-controller-manager; do
		if [ -z "${FORCE:-}" ] && [ -x "$LAB/bin/$c" ] && [ "$(cat "$LAB/bin/.$c.stamp" 2>/dev/null)" = "$want" ]; then
			log "$c: cached"
			continue
		fi
		[ -n "$prepared" ] || { prepare k8s; prepared=1; }
		local s; s=$(date +%s)
		(cd "$LAB/build/k8s" && go build -trimpath -ldflags="-s -w $ld" -o "$LAB/bin/$c" "k8s.io/kubernetes/cmd/$c")
		echo "$want" > "$LAB/bin/.$c.stamp"
		log "$c: built in $(( $(date +%s) - s ))s"
	done
}

# build_agent_sandbox <dir> <suffix>: the controller pinned in build/<dir> -> $LAB/bin/agent-sandbox-controller<suffix>,
# its CRDs (from the same module source) -> $LAB/manifests/agent-sandbox<suffix>/. v0.5.6 is built from a copy
# of the module with one line changed: its webhook server has no bind-address flag and would listen on every
# interface; the copy binds it to 127.0.0.1 like every other server of the lab.
build_agent_sandbox() {
	local d=$1 sfx=$2 want dir bin=$LAB/bin/agent-sandbox-controller$2 man=$LAB/manifests/agent-sandbox$2
	want=$(stamp "$HERE/build/$d")
	if [ -z "${FORCE:-}" ] && [ -x "$bin" ] && [ "$(cat "$LAB/bin/.agent-sandbox-controller$sfx.stamp" 2>/dev/null)" = "$want" ] &&
		[ -n "$(ls "$man/"*.yaml 2>/dev/null)" ]; then
		log "agent-sandbox-controller$sfx: cached"
		return
	fi
	prepare "$d"
	local s; s=$(date +%s)
	dir=$(cd "$LAB/build/$d" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
	if grep -q 'webhook.NewServer(webhook.Options{' "$dir/cmd/agent-sandbox-controller/main.go"; then
		rm -rf "$LAB/build/$d/src"
		cp -r "$dir" "$LAB/build/$d/src"
		chmod -R u+w "$LAB/build/$d/src"
		sed -i 's|webhook.NewServer(webhook.Options{|webhook.NewServer(webhook.Options{Host: "127.0.0.1", // sbx lab: loopback only|' \
			"$LAB/build/$d/src/cmd/agent-sandbox-controller/main.go"
		grep -q 'sbx lab: loopback only' "$LAB/build/$d/src/cmd/agent-sandbox-controller/main.go" ||
			{ echo "build: the webhook bind patch did not apply to agent-sandbox$sfx" >&2; exit 1; }
		(cd "$LAB/build/$d" && go mod edit -replace sigs.k8s.io/agent-sandbox=./src)
		dir=$LAB/build/$d/src
	fi
	(cd "$LAB/build/$d" && go build -trimpath -ldflags='-s -w' -o "$bin" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
	rm -rf "$man"
	mkdir -p "$man"
	cp "$dir"/k8s/crds/*.yaml "$man/"
	chmod u+w "$man/"*.yaml
	echo "$want" > "$LAB/bin/.agent-sandbox-controller$sfx.stamp"
	log "agent-sandbox-controller$sfx: built in $(( $(date +%s) - s ))s"
}

# build_gvisor: runsc and containerd-shim-runsc-v1 from the gvisor.dev/gvisor module pinned in build/gvisor,
# built from a copy of the module with one change: the shim's start makes its own oom_score_adj write
# non-fatal (this machine's root has no CAP_SYS_RESOURCE: "failed to set OOM Score on shim: permission
# denied"). containerd 1.6 reads `shim start`'s output as a bare socket address while this shim prints JSON
# ({"version":2,"address":...}); $LAB/bin/containerd-shim-runsc-v1 is a wrapper that prints the address only.
build_gvisor() {
	local want dir b=$LAB/build/gvisor s
	want=$(stamp "$HERE/build/gvisor")
	if [ -z "${FORCE:-}" ] && [ -x "$LAB/bin/runsc" ] && [ -x "$LAB/bin/containerd-shim-runsc-v1.bin" ] &&
		[ "$(cat "$LAB/bin/.gvisor.stamp" 2>/dev/null)" = "$want" ]; then
		log "gvisor: cached"
		return
	fi
	prepare gvisor
	s=$(date +%s)
	dir=$(cd "$b" && go list -m -f '{{.Dir}}' gvisor.dev/gvisor)
	rm -rf "$b/src"
	cp -r "$dir" "$b/src"
	chmod -R u+w "$b/src"
	sed -i 's|return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)|_ = err // sbx lab: no CAP_SYS_RESOURCE; a shim printing a warning would break containerd 1.6|' \
		"$b/src/pkg/shim/v1/manager.go"
	grep -q 'sbx lab: no CAP_SYS_RESOURCE' "$b/src/pkg/shim/v1/manager.go" ||
		{ echo "build: the gVisor shim patch did not apply (pkg/shim/v1/manager.go changed upstream?)" >&2; exit 1; }
	(cd "$b" && go mod edit -replace gvisor.dev/gvisor=./src && go mod tidy -e 2>&1 | grep -v '^go: downloading' | tail -5) || true
	(cd "$b" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$LAB/bin/runsc" gvisor.dev/gvisor/runsc)
	(cd "$b" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$LAB/bin/containerd-shim-runsc-v1.bin" gvisor.dev/gvisor/shim)
	cat > "$LAB/bin/containerd-shim-runsc-v1" <<EOW
#!/bin/sh
# sbx lab (build.sh): containerd 1.6 wants a bare address from "shim start"; this shim prints JSON.
real=$LAB/bin/containerd-shim-runsc-v1.bin
for last in "\$@"; do :; done
if [ "\$last" = start ]; then
	out=\$("\$real" "\$@"); rc=\$?
	case "\$out" in
	*'"address"'*) printf '%s' "\$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p' | tr -d '\n' ;;
	*) printf '%s' "\$out" ;;
	esac
	exit \$rc
fi
exec "\$real" "\$@"
EOW
	chmod +x "$LAB/bin/containerd-shim-runsc-v1"
	echo "$want" > "$LAB/bin/.gvisor.stamp"
	log "gvisor (runsc, containerd-shim-runsc-v1): built in $(( $(date +%s) - s ))s"
}

# oci_image <ref> <rootfs> <cmd-json> <out.tar>: a single-layer OCI image layout tarball.
oci_image() {
	local ref=$1 rootfs=$2 cmd=$3 out=$4 d
	d=$(mktemp -d)
	mkdir -p "$d/blobs/sha256"
	tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -cf "$d/layer.tar" .
	local diffid ldig lsize cdig csize mdig msize
	diffid=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
	gzip -n -6 < "$d/layer.tar" > "$d/layer.tgz"
	ldig=$(sha256sum "$d/layer.tgz" | cut -d' ' -f1); lsize=$(stat -c %s "$d/layer.tgz")
	mv "$d/layer.tgz" "$d/blobs/sha256/$ldig"; rm "$d/layer.tar"
	printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$cmd" "$diffid" > "$d/config.json"
	cdig=$(sha256sum "$d/config.json" | cut -d' ' -f1); csize=$(stat -c %s "$d/config.json")
	mv "$d/config.json" "$d/blobs/sha256/$cdig"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
		"$cdig" "$csize" "$ldig" "$lsize" > "$d/manifest.json"
	mdig=$(sha256sum "$d/manifest.json" | cut -d' ' -f1); msize=$(stat -c %s "$d/manifest.json")
	mv "$d/manifest.json" "$d/blobs/sha256/$mdig"
	echo '{"imageLayoutVersion":"1.0.0"}' > "$d/oci-layout"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$mdig" "$msize" "$ref" "${ref##*:}" > "$d/index.json"
	tar -C "$d" -cf "$out" oci-layout index.json blobs
	rm -rf "$d"
	log "image $ref -> $out"
}

build_images() {
	if [ -z "${FORCE:-}" ] && [ -f "$LAB/images/busybox.tar" ] && [ -f "$LAB/images/pause.tar" ]; then
		log "images: cached"
		return
	fi
	local w; w=$(mktemp -d)
	# busybox: a static busybox with one symlink per applet, root and an unprivileged user 1000
	local rb=$w/busybox app
	mkdir -p "$rb"/{bin,etc,tmp,proc,sys,dev,root,home/sbx,workspace}
	chmod 1777 "$rb/tmp" "$rb/workspace"
	cp /bin/busybox "$rb/bin/busybox"
	for app in $(/bin/busybox --list); do [ -e "$rb/bin/$app" ] || ln -s busybox "$rb/bin/$app"; done
	printf 'root:x:0:0:root:/root:/bin/sh\nsbx:x:1000:1000:sbx:/home/sbx:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$rb/etc/passwd"
	printf 'root:x:0:\nsbx:x:1000:\nnogroup:x:65534:\n' > "$rb/etc/group"
	chown 1000:1000 "$rb/home/sbx"
	oci_image lab.local/busybox:v1 "$rb" '["/bin/sh"]' "$LAB/images/busybox.tar"
	# pause: a tiny Go program that sleeps, reaps zombies and exits on SIGTERM
	local rp=$w/pause
	mkdir -p "$rp"
	(cd "$HERE/pause" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rp/pause" .)
	oci_image lab.local/pause:v1 "$rp" '["/pause"]' "$LAB/images/pause.tar"
	rm -rf "$w"
}

"$HERE/debs.sh"
t0=$(date +%s)
build_images
build_agent_sandbox agent-sandbox ""
build_agent_sandbox agent-sandbox-v0.5.6 -v0.5.6
build_gvisor
build_k8s
log "done in $(( $(date +%s) - t0 ))s"
