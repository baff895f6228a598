#!/usr/bin/env bash
# The cluster backend's end-to-end test, in one command (as root, on Linux):
#
#   test/e2e/cluster/run.sh            # build or reuse, boot, test, stop
#   BENCH=1 test/e2e/cluster/run.sh    # also run the benchmarks, write docs/benchmarks-cluster.md
#   KEEP=1 test/e2e/cluster/run.sh     # leave the cluster running afterwards (stop it with down.sh)
#
# It builds Kubernetes v1.37.2 and agent-sandbox v0.1.1 from the Go module proxy (build.sh; cached in
# $LAB/bin, ~16 min cold on 2 cores, seconds warm), boots a single-node cluster on 127.0.0.1 (up.sh,
# ~25 s), runs `go test -tags e2e ./test/e2e/cluster/`, and always stops every daemon it started
# (down.sh, from a trap, on failure too). State: $LAB (default /var/tmp/sbx-cluster-lab).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
LAB=${LAB:-/var/tmp/sbx-cluster-lab}
export LAB PATH=/usr/local/go/bin:$PATH
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (containerd, kubelet)" >&2; exit 2; }
mkdir -p "$LAB/logs"
t0=$(date +%s)
"$HERE/build.sh"
t1=$(date +%s)
# a previous run that was killed may have left daemons or state behind
WIPE=1 "$HERE/down.sh" >/dev/null 2>&1 || true
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
"$HERE/up.sh"
t2=$(date +%s)
cd "$ROOT"
export SBX_E2E_KUBECONFIG=$LAB/etc/admin.kubeconfig SBX_E2E_KUBECTL=$LAB/bin/kubectl
set +e
go test -tags e2e -count=1 -v -timeout 20m -skip '^TestBenchmarks$' ./test/e2e/cluster/ 2>&1 | tee "$LAB/logs/e2e-test.log"
rc=${PIPESTATUS[0]}
if [ "$rc" = 0 ] && [ -n "${BENCH:-}" ]; then
	SBX_E2E_BENCH_OUT=${BENCH_OUT:-$ROOT/docs/benchmarks-cluster.md} go test -tags e2e -count=1 -v -timeout 30m \
		-run 'TestBenchmarks' ./test/e2e/cluster/ 2>&1 | tee "$LAB/logs/e2e-bench.log"
	rc=${PIPESTATUS[0]}
fi
set -e
echo "run.sh: build $((t1 - t0))s, boot $((t2 - t1))s, tests $(( $(date +%s) - t2 ))s, total $(( $(date +%s) - t0 ))s"
exit "$rc"
