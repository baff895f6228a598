#!/bin/sh
# Per-node package caches of sbx tenants: /var/lib/sbx/cache/<tenant>, mounted into that tenant's
# sandboxes (sbx pool render --cache-mount PATH), owned by the sandboxes' non-root uid.
# UNTESTED on a k3s node (the e2e harness makes the same directory by hand); shellcheck-clean.
#
#   ./cache.sh add TENANT               # create the tenant's directory (before its pool is applied)
#   ./cache.sh gc [DAYS] [MAX_MB]        # per tenant: delete files unused for DAYS (default 14), then the
#                                        # least recently used until the tenant is under MAX_MB (default 20480)
# Run gc from cron or a systemd timer, e.g. daily.
set -eu
ROOT=${CACHE_ROOT:-/var/lib/sbx/cache}
UID_=${SANDBOX_UID:-1000}

case "${1:-}" in
add)
	t=${2:?usage: cache.sh add TENANT}
	case "$t" in *[!a-z0-9-]* | -* | "") echo "cache.sh: tenant must be a DNS label" >&2; exit 2 ;; esac
	mkdir -p "$ROOT"
	chmod 0711 "$ROOT"
	mkdir -p "$ROOT/$t"
	chown "$UID_:$UID_" "$ROOT/$t"
	chmod 0750 "$ROOT/$t"
	echo "$ROOT/$t"
	;;
gc)
	days=${2:-14}
	max_mb=${3:-20480}
	[ -d "$ROOT" ] || exit 0
	for d in "$ROOT"/*/; do
		[ -d "$d" ] || continue
		find "$d" -xdev -type f -atime +"$days" -delete
		find "$d" -xdev -mindepth 1 -type d -empty -delete
		used=$(du -sm "$d" | cut -f1)
		if [ "$used" -gt "$max_mb" ]; then
			# oldest access first; stop once under the cap
			find "$d" -xdev -type f -printf '%A@ %s %p\n' | sort -n | while read -r _ size path; do
				[ "$used" -le "$max_mb" ] && break
				rm -f "$path"
				used=$((used - size / 1048576))
			done
		fi
		echo "cache.sh: $d $(du -sm "$d" | cut -f1) MB"
	done
	;;
*)
	echo "usage: cache.sh add TENANT | cache.sh gc [DAYS] [MAX_MB]" >&2
	exit 2
	;;
esac
