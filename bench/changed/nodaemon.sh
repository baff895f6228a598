#!/bin/bash
# A/B of sbx builds on `sbx exec --keep -- true` without the host daemon
# (SBX_HOST_DAEMON=false: each command a process that scans the tree), with no
# change and after one host file changed, the builds alternating, and `find
# -printf` of the tree in the same loop (docs/benchmarks.md, S27). Each build
# gets its own copy of TREE (which must hold src/pkg000/sub00/file00000.go, as
# internal/testtree's trees do) and its own kept session; work in /var/tmp.
#
#   bench/changed/nodaemon.sh TREE N SBX...
set -eu
tree=$1 n=$2; shift 2
work=$(mktemp -d /var/tmp/nd.XXXXXX)
export SBX_HOST_DAEMON=false
for b in "$@"; do v=$(basename $b); cp -a "$tree" "$work/$v"; (cd "$work/$v" && $b exec --keep --session nd-$v -- true >/dev/null && $b exec --keep --session nd-$v -- true >/dev/null); done
for i in $(seq $n); do
  for b in "$@"; do v=$(basename $b)
    s=$(date +%s%N); (cd "$work/$v" && $b exec --keep --session nd-$v -- true >/dev/null 2>&1); e=$(date +%s%N); echo "$v nochange $(((e-s)/1000))"
    echo "edit $i" >> "$work/$v/src/pkg000/sub00/file00000.go"
    s=$(date +%s%N); (cd "$work/$v" && $b exec --keep --session nd-$v -- true >/dev/null 2>&1); e=$(date +%s%N); echo "$v onefile $(((e-s)/1000))"
  done
  s=$(date +%s%N); (cd "$work/$(basename $1)" && find . -printf '%s %T@\n' >/dev/null); e=$(date +%s%N); echo "find walk $(((e-s)/1000))"
done > "$work.times"
for b in "$@"; do v=$(basename $b); (cd "$work/$v" && $b release --session nd-$v >/dev/null 2>&1) || true; done
rm -rf "$work"
trap 'rm -f "$work.times"' EXIT
awk '{k=$1" "$2; a[k]=a[k]" "$3} END {for (k in a) print k, a[k]}' "$work.times" | while read v w rest; do echo "$v $w median $(echo $rest | tr ' ' '\n' | sort -n | awk '{x[NR]=$1} END {printf "%.1f ms of %d", x[int((NR+1)/2)]/1000, NR}')"; done | sort
