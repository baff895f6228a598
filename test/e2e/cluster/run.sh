#!/usr/bin/env bash
# The cluster backend's end-to-end test, in one command (as root, on Linux):
#
#   test/e2e/cluster/run.sh            # build or reuse, then for each pass: boot, test, stop
#   BENCH=1 test/e2e/cluster/run.sh    # also run the benchmarks (last pass), write docs/benchmarks-cluster.md
#   KEEP=1 test/e2e/cluster/run.sh     # leave the last pass's cluster running (stop it with down.sh)
#   PASSES="v0.5.6-v1beta1:gvisor" test/e2e/cluster/run.sh   # some passes only
#
# It builds Kubernetes v1.37.2, agent-sandbox v0.1.1 and v0.5.6, and gVisor (runsc and its containerd
# shim) from the Go module proxy (build.sh; cached in $LAB/bin, ~16 min cold on 2 cores, seconds warm).
# Each pass <agent-sandbox>:<runtime> of $PASSES starts from a wiped cluster (no CRDs, no controller, no
# etcd data), boots it on 127.0.0.1 (up.sh, ~25 s), runs `go test -tags e2e ./test/e2e/cluster/` with
# the warm pool under that runtime, and stops every daemon it started (down.sh, also from a trap on
# failure or interrupt). A failed pass does not stop the next ones; the exit status is the first failure's.
#   agent-sandbox: v0.1.1 (v1alpha1) | v0.5.6 (v1beta1 preferred, v1alpha1 by conversion) |
#                  v0.5.6-v1beta1 (v1alpha1 not served, as agent-sandbox v1.0 serves)
#   runtime:       gvisor (RuntimeClass gvisor, runsc) | runc
# One run at a time per $LAB (a lock; a second run waits up to 30 min). State: $LAB (default
# /var/tmp/sbx-cluster-lab); logs of pass P: $LAB/logs/P/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
LAB=${LAB:-/var/tmp/sbx-cluster-lab}
PASSES=${PASSES:-v0.1.1:gvisor v0.5.6:gvisor v0.5.6-v1beta1:gvisor v0.5.6-v1beta1:runc}
export LAB PATH=/usr/local/go/bin:$PATH
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (containerd, kubelet)" >&2; exit 2; }
mkdir -p "$LAB/logs"
exec 9>"$LAB/.run.lock"
flock -w 1800 9 || { echo "run.sh: another run.sh holds $LAB/.run.lock for 30 min; is one stuck?" >&2; exit 1; }
t0=$(date +%s)
"$HERE/build.sh"
t1=$(date +%s)
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	local rc=$?
	if [ -n "${KEEP:-}" ]; then
		echo "run.sh: KEEP=1: cluster left running; stop it with $HERE/down.sh"
	else
		"$HERE/down.sh" || true
	fi
	if [ "$rc" -ne 0 ]; then
		echo "run.sh: FAILED (exit $rc); daemon logs are in $LAB/logs" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$ROOT"
export SBX_E2E_KUBECONFIG=$LAB/etc/admin.kubeconfig SBX_E2E_KUBECTL=$LAB/bin/kubectl
status=0 summary="" last=${PASSES##* }
for pass in $PASSES; do
	as=${pass%%:*} rt=${pass#*:} ps=$(date +%s) prc=0
	case "$as" in
	v0.1.1) av=v0.1.1 serve=all ;;
	v0.5.6) av=v0.5.6 serve=all ;;
	v0.5.6-v1beta1) av=v0.5.6 serve=v1beta1 ;;
	*) echo "run.sh: pass $pass: unknown agent-sandbox $as" >&2; exit 2 ;;
	esac
	case "$rt" in gvisor) rc_name=gvisor ;; runc) rc_name="" ;; *) echo "run.sh: pass $pass: unknown runtime $rt" >&2; exit 2 ;; esac
	echo "=== run.sh: pass $pass (agent-sandbox $av, served $serve, runtime $rt)"
	# a clean controller/CRD state: whatever the last pass (or a killed run) left is stopped and wiped
	WIPE=1 "$HERE/down.sh" >/dev/null 2>&1 || true
	# the daemons must not inherit the lock's fd (9): it would outlive this run with them
	AS_VERSION=$av AS_SERVE=$serve "$HERE/up.sh" 9>&- || prc=$?
	if [ "$prc" = 0 ]; then
		set +e
		SBX_E2E_AGENT_SANDBOX=$as SBX_E2E_RUNTIME_CLASS=$rc_name go test -tags e2e -count=1 -v -timeout 20m \
			-skip '^TestBenchmarks$' ./test/e2e/cluster/ 2>&1 | tee "$LAB/logs/e2e-test.log"
		prc=${PIPESTATUS[0]}
		if [ "$prc" = 0 ] && [ -n "${BENCH:-}" ] && [ "$pass" = "$last" ]; then
			SBX_E2E_AGENT_SANDBOX=$as SBX_E2E_RUNTIME_CLASS=$rc_name SBX_E2E_BENCH_OUT=${BENCH_OUT:-$ROOT/docs/benchmarks-cluster.md} \
				go test -tags e2e -count=1 -v -timeout 30m -run 'TestBenchmarks' ./test/e2e/cluster/ 2>&1 | tee "$LAB/logs/e2e-bench.log"
			prc=${PIPESTATUS[0]}
		fi
		set -e
	fi
	if [ "$pass" != "$last" ] || [ -z "${KEEP:-}" ]; then "$HERE/down.sh" >/dev/null || true; fi
	rm -rf "${LAB:?}/logs/$pass"
	mkdir -p "$LAB/logs/$pass"
	cp "$LAB"/logs/*.log "$LAB/logs/$pass/" 2>/dev/null || true
	summary="$summary
run.sh: pass $pass: $([ "$prc" = 0 ] && echo ok || echo "FAILED (exit $prc)") in $(( $(date +%s) - ps ))s"
	[ "$status" != 0 ] || status=$prc
done
echo "$summary"
echo "run.sh: build $((t1 - t0))s, passes $(( $(date +%s) - t1 ))s, total $(( $(date +%s) - t0 ))s"
exit "$status"
