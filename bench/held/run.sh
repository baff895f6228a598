#!/bin/bash
# A/B of two sbx builds on no-change `sbx exec --keep -- true` while the
# sandbox's deletion of a whole tree waits for `sbx accept` (docs/benchmarks.md
# H21). Each build gets its own copy of TREE and its own kept session, so the
# two host daemons (keyed to their binary) never share one; calls alternate.
#
#   bench/held/run.sh OLD_SBX NEW_SBX TREE [N]
set -eu
old=$1 new=$2 tree=$3 n=${4:-15}
work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-held.XXXXXX")
trap 'for v in old new; do (cd "$work/$v" && "${bin[$v]}" release --session "held-$v" >/dev/null 2>&1; "${bin[$v]}" accept --reject-deletions --session "held-$v" >/dev/null 2>&1) || true; done; rm -rf "$work"' EXIT
declare -A bin=([old]=$old [new]=$new)
for v in old new; do
	# What an earlier run of this script left held would be read too.
	"${bin[$v]}" accept --reject-deletions --session "held-$v" >/dev/null 2>&1 || true
	cp -a "$tree" "$work/$v"
	(cd "$work/$v" && "${bin[$v]}" exec --keep --session "held-$v" -- true >/dev/null)
	out=$(cd "$work/$v" && "${bin[$v]}" exec --keep --session "held-$v" -- 'find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +' 2>&1)
	case $out in *"sbx: held:"*) ;; *) echo "$v: the deletion was not held: $out" >&2; exit 1 ;; esac
done
for _ in $(seq "$n"); do
	for v in old new; do
		s=$(date +%s%N)
		(cd "$work/$v" && "${bin[$v]}" exec --keep --session "held-$v" -- true >/dev/null 2>&1)
		e=$(date +%s%N)
		echo "$v $(((e - s) / 1000))"
	done
done >"$work/times"
for v in old new; do
	grep "^$v " "$work/times" | awk '{print $2}' | sort -n |
		awk -v v="$v" '{a[NR] = $1} END {printf "%s: median %.1f ms of %d calls\n", v, a[int((NR + 1) / 2)] / 1000, NR}'
done
