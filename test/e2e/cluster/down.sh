#!/usr/bin/env bash
# Stop every daemon up.sh started (by the PIDs it recorded, never by name), tear pods down through the
# kubelet while it still runs, remove leftover pod sandboxes through containerd, unmount what the kubelet
# mounted under $LAB, restore the sysctls the kubelet changed. WIPE=1 also deletes cluster state (etcd,
# kubelet, containerd); the built binaries and images in $LAB/bin and $LAB/images are kept.
set -uo pipefail
LAB=${LAB:-/var/tmp/sbx-cluster-lab}
R=$LAB/run

# stop <name>: TERM the recorded PID, KILL it after 5 s.
stop() {
	local f=$R/$1.pid p i
	[ -f "$f" ] || return 0
	p=$(cat "$f")
	if kill -0 "$p" 2>/dev/null; then
		kill "$p"
		for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && kill -9 "$p"
	fi
	rm -f "$f"
}

alive() { [ -f "$R/$1.pid" ] && kill -0 "$(cat "$R/$1.pid")" 2>/dev/null; }

stop agent-sandbox-controller
if alive kubelet && alive kube-apiserver; then
	k=("$LAB/bin/kubectl" --kubeconfig "$LAB/etc/admin.kubeconfig" --request-timeout=20s)
	"${k[@]}" delete sandboxclaims,sandboxwarmpools,sandboxes --all -A --wait=false >/dev/null 2>&1
	timeout 60 "${k[@]}" delete pods --all -A --grace-period=1 --wait=true >/dev/null 2>&1 ||
		echo "down: some pods did not terminate in 60s"
fi
stop kubelet
stop kube-scheduler
stop kube-controller-manager
if alive containerd; then
	c=(timeout 15 ctr --address "$R/containerd.sock" -n k8s.io)
	for t in $("${c[@]}" task ls -q 2>/dev/null); do "${c[@]}" task kill -s KILL "$t" >/dev/null 2>&1; done
	sleep 1
	for t in $("${c[@]}" task ls -q 2>/dev/null); do "${c[@]}" task delete -f "$t" >/dev/null 2>&1; done
	for t in $("${c[@]}" containers ls -q 2>/dev/null); do "${c[@]}" containers rm "$t" >/dev/null 2>&1; done
fi
stop kube-apiserver
stop etcd
stop containerd
# shims of our containerd re-parent to init when it stops; they name our socket in their arguments
for p in $(pgrep -f -- "-address $R/containerd.sock" 2>/dev/null); do kill "$p" 2>/dev/null; done
# gVisor sandboxes and gofers left behind (a shim killed before its pod was deleted): they are ours when
# they name our runsc root; delete them through runsc, then kill what remains
if [ -x "$LAB/bin/runsc" ]; then
	for root in "$R/runsc-root" "$R"/runsc-root/*; do
		[ -d "$root" ] || continue
		for id in $("$LAB/bin/runsc" --root "$root" list -quiet 2>/dev/null); do
			timeout 10 "$LAB/bin/runsc" --root "$root" delete -force "$id" >/dev/null 2>&1
		done
	done
	for p in $(pgrep -f -- "--root=$R/runsc-root" 2>/dev/null) $(pgrep -f -- "--root $R/runsc-root" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
fi
while read -r _ m _; do
	case "$m" in "$LAB"/*) umount -l "$m" 2>/dev/null ;; esac
done < <(tac /proc/mounts)
ip link show labbr0 >/dev/null 2>&1 && ip link delete labbr0
[ -f "$R/sysctl-before.txt" ] && sysctl -q -p "$R/sysctl-before.txt"
[ -n "${WIPE:-}" ] && rm -rf "$LAB/data" "$LAB/containerd" "$LAB/cni" "$R/runsc-root"
echo "down: cluster stopped"
exit 0
