#!/usr/bin/env bash
# Build (or reuse) everything the e2e cluster needs, from the Go module proxy and Debian only:
#   kube-apiserver, kubelet, kube-scheduler, kube-controller-manager, kubectl  (build/k8s/go.mod)
#   agent-sandbox-controller + its CRDs                                       (build/agent-sandbox/go.mod)
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

build_agent_sandbox() {
	local want dir
	want=$(stamp "$HERE/build/agent-sandbox")
	if [ -z "${FORCE:-}" ] && [ -x "$LAB/bin/agent-sandbox-controller" ] &&
		[ "$(cat "$LAB/bin/.agent-sandbox-controller.stamp" 2>/dev/null)" = "$want" ] &&
		[ -n "$(ls "$LAB/manifests/agent-sandbox/"*.yaml 2>/dev/null)" ]; then
		log "agent-sandbox-controller: cached"
		return
	fi
	prepare agent-sandbox
	local s; s=$(date +%s)
	(cd "$LAB/build/agent-sandbox" && go build -trimpath -ldflags='-s -w' -o "$LAB/bin/agent-sandbox-controller" \
		sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
	dir=$(cd "$LAB/build/agent-sandbox" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
	cp "$dir"/k8s/crds/*.yaml "$LAB/manifests/agent-sandbox/"
	chmod u+w "$LAB/manifests/agent-sandbox/"*.yaml
	echo "$want" > "$LAB/bin/.agent-sandbox-controller.stamp"
	log "agent-sandbox-controller: built in $(( $(date +%s) - s ))s"
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
build_agent_sandbox
build_k8s
log "done in $(( $(date +%s) - t0 ))s"
