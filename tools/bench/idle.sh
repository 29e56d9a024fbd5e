#!/bin/bash
# tools/bench/idle.sh — a full backup's read rate on an idle database against dd O_DIRECT
# (512 KiB, 1 MiB, 2 MiB requests over the relation files over 1 MiB), and two pageback
# binaries side by side (OLD_BIN and PB_BIN, their order swapped every other round),
# caches dropped before each pass, three rounds (this virtual disk's rate moves by 2x
# between passes).
#   OLD_BIN=/path/to/old/pageback SCALE=60 PB_BIN=build/pageback tools/bench/idle.sh
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
SCALE=${SCALE:-60}
OLD=${OLD_BIN:?}
bench_setup idle
trap '_pb_rc=$?; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT
bench_pgbr_prepare
bench_cluster "$SCALE"
pb backup --type full >/dev/null 2>&1 || pb_die "first"
mapfile -t FILES < <(find "$SRC/base" -type f -size +1M | sort)
BYTES=$(cat "${FILES[@]}" | wc -c)
NEW=$PB_BIN
for rep in 1 2 3; do
    for bs in 512K 1M 2M; do
        bench_drop_caches
        t0=$(date +%s.%N)
        for f in "${FILES[@]}"; do dd if="$f" of=/dev/null bs="$bs" iflag=direct status=none; done
        t1=$(date +%s.%N)
        echo "rep $rep dd_$bs $(awk -v b="$BYTES" -v a="$t0" -v c="$t1" 'BEGIN {printf "%.0f", b / 1e6 / (c - a)}') MB/s"
    done
    # The order alternates by round: the second backup of a round runs while the host may
    # still be absorbing the first one's repository writes.
    order="old new"; [ $((rep % 2)) -eq 0 ] && order="new old"
    for which in $order; do
        [ $which = old ] && PB_BIN=$OLD || PB_BIN=$NEW
        bench_drop_caches
        bench_pb backup --type full || pb_die "backup failed"
        echo "rep $rep pageback_$which $(grep -o 'scanned .*' "$BENCH_TMP/pb.out" | head -1) cpu $T_CPU s rss $T_RSS_MIB"
        grep -E "I/O:|stages:|CPU per GB" "$BENCH_TMP/pb.out" | sed "s/^/    $which: /" | cut -c1-300
    done
done
