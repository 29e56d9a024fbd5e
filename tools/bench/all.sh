#!/bin/bash
# tools/bench/all.sh — every benchmark, one after the other (never two at once: they
# would measure each other). Tables go to stdout, results to tools/bench/results/.
#   PB_BIN=build-bench/pageback tools/bench/all.sh            # ~35 minutes on 2 vCPUs
#   tools/bench/all.sh full incr                               # a subset
dir=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- full incr restore_chain sweep cache
rc=0
for b in "$@"; do
    echo "=== $b ($(date -u +%H:%M:%S))"
    "$dir/$b.sh" || { echo "=== $b FAILED" >&2; rc=1; }
done
exit $rc
