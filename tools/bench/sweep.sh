#!/bin/bash
# tools/bench/sweep.sh — where does pageback's full-backup time go? One cluster, then
# for each setting the same full backup, and fio at the same request size and queue
# depth, alternating, caches dropped before every run:
#   read size x queue depth   (BENCH_SWEEP, default "256:8 1024:4 1024:8 1024:16 4096:8")
#   --no-uring                (pread workers instead of io_uring, default settings)
#   --no-direct               (buffered + fadvise, default settings)
#   --compress-level 3        (compression cost)
# Reports MiB/s from pageback's own timer and from its wall time, CPU seconds, and
# the ratio to fio with the same request size and queue depth.
#
#   tools/bench/sweep.sh                  # scale 100, 2 repetitions
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-100}
BENCH_REPS=${BENCH_REPS:-2}
SWEEP=${BENCH_SWEEP:-256:8 1024:4 1024:8 1024:16 4096:8}

bench_setup sweep
bench_pgbr_prepare
bench_cluster "$SCALE"
bench_tune "$SRC"

mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }

run_pb() {
    local label=$1 read secs id
    shift
    bench_pb backup --type full --pgdata "$SRC" "$@" || return 1
    id=$(pb_last_id)
    read -r read secs <<<"$(bench_pb_info "$id" bytes_read seconds)"
    bench_rec kind=run tool="pageback $label" rep="$REP" wall_s="$T_WALL" inner_s="$secs" \
        cpu_s="$T_CPU" rss_mib="$T_RSS_MIB" read_mib="$(mib "$read")" \
        mib_s_inner="$(awk -v b="$read" -v s="$secs" 'BEGIN {printf "%.1f", b / 1048576 / s}')" \
        mib_s_wall="$(awk -v b="$read" -v s="$T_WALL" 'BEGIN {printf "%.1f", b / 1048576 / s}')"
    pb_log "rep $REP pageback $label: ${secs}s own timer, ${T_WALL}s wall, CPU ${T_CPU}s"
    # Keep the repository small: only the newest full matters here.
    pb expire --retain-full 1 >/dev/null 2>&1
}

run_fio() {
    bench_fio "$SRC" "$1" "$2" || return 1
    bench_rec kind=run tool="fio $1k qd$2" rep="$REP" wall_s="$T_WALL" inner_s="$RAW_S" \
        cpu_s="$T_CPU" read_mib="$(mib "$RAW_BYTES")" mib_s_inner="$RAW_MIBS" \
        mib_s_wall="$(awk -v b="$RAW_BYTES" -v s="$T_WALL" 'BEGIN {printf "%.1f", b / 1048576 / s}')"
    pb_log "rep $REP fio $1k qd$2: $RAW_MIBS MiB/s"
}

for REP in $(seq 1 "$BENCH_REPS"); do
    for s in $SWEEP; do
        rs=${s%%:*} qd=${s##*:}
        for what in fio pb; do
            pg_psql "$SRC" "CHECKPOINT" >/dev/null
            bench_wait_archived "$SRC"
            bench_drop_caches
            if [ "$what" = fio ]; then
                run_fio "$rs" "$qd" || pb_die "fio failed"
            else
                run_pb "${rs}k qd$qd" --read-size "$((rs * 1024))" --queue-depth "$qd" ||
                    pb_die "pageback failed"
            fi
        done
    done
    for opt in --no-uring --no-direct "--compress-level 3"; do
        pg_psql "$SRC" "CHECKPOINT" >/dev/null
        bench_drop_caches
        # shellcheck disable=SC2086
        run_pb "${opt#--}" $opt || pb_die "pageback $opt failed"
    done
done

echo
echo "pageback full backup settings sweep, pgbench scale $SCALE, $BENCH_REPS repetitions (medians):"
bench_report full
