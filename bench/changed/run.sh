#!/bin/bash
# A/B of two sbx builds on a round that moves FILES changed files: append a
# line to each of the same FILES files of TREE, then `sbx exec --keep -- true`
# through the host daemon (docs/benchmarks.md, S27). Each build gets its own
# copy of TREE and its own kept session; the builds alternate, and `tar c |
# tar x` of the same files, just changed, is timed in the same loop as the
# cost of moving them.
#
#   bench/changed/run.sh OLD_SBX NEW_SBX TREE [N] [FILES]
set -eu
old=$1 new=$2 tree=$3 n=${4:-15} files=${5:-1000}
work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-changed.XXXXXX")
declare -A bin=([old]=$old [new]=$new)
trap 'for v in old new; do (cd "$work/$v" && "${bin[$v]}" release --session "changed-$v" >/dev/null 2>&1) || true; done; rm -rf "$work"' EXIT
for v in old new; do
	cp -a "$tree" "$work/$v"
	(cd "$work/$v" && "${bin[$v]}" exec --keep --session "changed-$v" -- true >/dev/null)
	# The same files each time: regular files, in a fixed order.
	(cd "$work/$v" && find . -path ./.git -prune -o -type f -name '*.go' -print | sort | head -n "$files") >"$work/list-$v"
	[ "$(wc -l <"$work/list-$v")" = "$files" ] || { echo "$v: fewer than $files files in $tree" >&2; exit 1; }
done
mkdir "$work/tar"
for i in $(seq "$n"); do
	for v in old new; do
		(cd "$work/$v" && xargs -a "$work/list-$v" -d '\n' sh -c 'for f; do echo "edit '"$i"'" >>"$f"; done' sh)
		s=$(date +%s%N)
		(cd "$work/$v" && "${bin[$v]}" exec --keep --session "changed-$v" -- true >/dev/null 2>&1)
		e=$(date +%s%N)
		echo "$v $(((e - s) / 1000))"
	done
	s=$(date +%s%N)
	(cd "$work/new" && tar cf - -T "$work/list-new") | (cd "$work/tar" && tar xf -)
	e=$(date +%s%N)
	echo "tar $(((e - s) / 1000))"
done >"$work/times"
cp "$work/times" "${TIMES_OUT:-/dev/null}"
for v in old new tar; do
	grep "^$v " "$work/times" | awk '{print $2}' | sort -n |
		awk -v v="$v" '{a[NR] = $1} END {printf "%s: median %.1f ms of %d\n", v, a[int((NR + 1) / 2)] / 1000, NR}'
done
