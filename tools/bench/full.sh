#!/bin/bash
# tools/bench/full.sh — full backup throughput, side by side in one run:
#   fio O_DIRECT  raw device limit: the relation files read with io_uring + O_DIRECT at
#                 pageback's read size and queue depth (what `pageback tune` picks)
#   dd O_DIRECT   the largest relation file, same request size, queue depth 1
#   pageback      backup --type full
#   pg_basebackup -Fp -X stream -c fast into a directory
#   pgbackrest    2.45 --type=full, compress-type=zst, process-max=2, start-fast
# The page cache is dropped before every run; each repetition runs every tool once,
# in a rotated order. Reports medians: wall time, MiB/s, CPU, peak RSS, stored bytes
# and how much of the relation files the tool left in the page cache.
#
#   tools/bench/full.sh                         # scale 100 (~1.5 GB), 3 repetitions
#   BENCH_SCALE=200 BENCH_REPS=2 PB_BIN=build-bench/pageback tools/bench/full.sh
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-100}

bench_setup full
bench_pgbr_prepare
bench_cluster "$SCALE"
bench_tune "$SRC"
pb_log "read size ${BENCH_READ_KIB} KiB, queue depth ${BENCH_QD}"
BIGGEST=$(bench_relfiles "$SRC" | xargs stat -c '%s %n' | sort -n | tail -n 1 | cut -d' ' -f2-)
bench_rec kind=setup scale="$SCALE" read_kib="$BENCH_READ_KIB" qd="$BENCH_QD" \
    data_mib="$(du -sm --exclude=pg_wal "$SRC" | cut -f1)"

mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "null"}'; }

# Record one run: TOOL READ_BYTES STORED_BYTES [INNER_SECONDS] [extra key=value...]
record_run() {
    local tool=$1 read=$2 stored=$3 inner=${4:-} res size
    shift 4 2>/dev/null || shift $#
    read -r res size <<<"$(bench_cached "$SRC")"
    bench_rec kind=run tool="$tool" rep="$REP" wall_s="$T_WALL" cpu_s="$T_CPU" \
        rss_mib="$T_RSS_MIB" read_mib="$(mib "$read")" stored_mib="$(mib "$stored")" \
        mib_s_wall="$(div "$(mib "$read")" "$T_WALL")" \
        inner_s="${inner:-$T_WALL}" mib_s_inner="$(div "$(mib "$read")" "${inner:-$T_WALL}")" \
        cached_mib="$(mib "$res")" cached_pct="$(awk -v r="$res" -v s="$size" \
            'BEGIN {printf "%.1f", 100 * r / s}')" caches_dropped="$BENCH_CACHES_DROPPED" "$@"
    pb_log "rep $REP $tool: wall ${T_WALL}s, $(div "$(mib "$read")" "${inner:-$T_WALL}") MiB/s," \
        "RSS ${T_RSS_MIB} MiB, left $(mib "$res") MiB cached"
}

run_fio() {
    bench_fio "$SRC" "$BENCH_READ_KIB" "$BENCH_QD" || return 1
    record_run "fio O_DIRECT" "$RAW_BYTES" 0 "$RAW_S" qd="$BENCH_QD" bs_kib="$BENCH_READ_KIB"
}

run_dd() {
    local out bytes secs
    T_RC=0
    bench_time dd if="$BIGGEST" of=/dev/null iflag=direct bs="${BENCH_READ_KIB}k" 2>"$BENCH_TMP/dd.out"
    out=$(tail -n 1 "$BENCH_TMP/dd.out")
    bytes=${out%% bytes*}
    secs=$(sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p' <<<"$out")
    record_run "dd O_DIRECT 1 file" "$bytes" 0 "$secs" qd=1 file="${BIGGEST#"$SRC"/}"
}

run_pageback() {
    local id read stored secs dir
    bench_pb backup --type full --pgdata "$SRC" || return 1
    id=$(pb_last_id)
    read -r read stored secs <<<"$(bench_pb_info "$id" bytes_read bytes_stored seconds)"
    dir=$(du -sb "$PB_REPO/backup/$id" | cut -f1)
    record_run pageback "$read" "$dir" "$secs" id="$id" bytes_stored="$stored" \
        summary="$(grep -m1 '^backup ' "$BENCH_TMP/pb.out" | tr ' =' '_:')"
}

run_basebackup() {
    local out=$BENCH_TMP/bb read
    rm -rf "$out"
    bench_time_pg "$PB_PGBIN/pg_basebackup" -D "$out" -Fp -X stream -c fast -h "$PGHOST" \
        -p "$PGPORT" -U postgres >"$BENCH_TMP/bb.out" 2>&1
    [ "$T_RC" = 0 ] || { cat "$BENCH_TMP/bb.out" >&2; return 1; }
    read=$(du -sb --exclude=pg_wal "$out" | cut -f1)
    record_run pg_basebackup "$read" "$(du -sb "$out" | cut -f1)" ""
    rm -rf "$out"
}

run_pgbackrest() {
    local size repo
    bench_pgbr_backup full || return 1
    read -r size repo _ <<<"$(bench_py pgbr-info "$BENCH_TMP/pgbr-info.json" "$PGBR_LABEL")"
    record_run pgbackrest "$size" "$(bench_pgbr_stored "$PGBR_LABEL")" "" label="$PGBR_LABEL"
}

TOOLS=(run_fio run_pageback run_basebackup run_pgbackrest run_dd)
n=${#TOOLS[@]}
for REP in $(seq 1 "$BENCH_REPS"); do
    for i in $(seq 0 $((n - 1))); do
        t=${TOOLS[$(((i + REP - 1) % n))]}
        pg_psql "$SRC" "CHECKPOINT" >/dev/null
        bench_wait_archived "$SRC"
        bench_drop_caches
        $t || pb_die "$t failed"
    done
done

echo
echo "Full backup, pgbench scale $SCALE, $BENCH_REPS repetitions (medians):"
bench_report full
