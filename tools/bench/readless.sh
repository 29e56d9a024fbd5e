#!/bin/bash
# tools/bench/readless.sh — how much an incremental reads after the same absolute change
# at two database sizes: pageback --incremental-mode scan, file and wal, and
# pgBackRest (Debian) --type=incr, on the same cluster and the same change.
#
# Per scale: a fresh cluster (autovacuum off: only the benchmark writes), then for each
# pageback mode a full backup, the change (BENCH_CHANGE_ROWS contiguous pgbench_accounts
# rows, the same number at every scale), a CHECKPOINT, caches dropped, the timed
# incremental; pgBackRest takes its own incremental after each change too. Recorded:
# bytes read as the tool reports it (pageback's bytes_read; pgBackRest reports none) and
# as the kernel counts it (/usr/bin/time %I, 512-byte units, children included: O_DIRECT
# reads are counted there too), wall time, peak RSS, and the data directory's size.
# The target (docs/DESIGN.md): after a 1% change, wal mode reads <= 3% of the data
# directory, and its read set grows with the change, not the size.
#
#   tools/bench/readless.sh                         # scales 100 and 400, 100000 rows
#   BENCH_SCALES=1 BENCH_CHANGE_ROWS=1000 BENCH_REPS=1 tools/bench/readless.sh  # smoke
source "$(dirname "$0")/lib.sh"
SCALES=${BENCH_SCALES:-100 400}
CHANGE_ROWS=${BENCH_CHANGE_ROWS:-100000}
MODES=${BENCH_MODES:-scan file wal}

# One scale per process: a repository belongs to one cluster.
if [ "${1:-}" != one ]; then
    rc=0
    for s in $SCALES; do
        BENCH_SCALE=$s "$0" one || rc=1
    done
    exit $rc
fi
SCALE=${BENCH_SCALE:-100}
bench_setup "readless-s$SCALE"
bench_pgbr_prepare
bench_cluster "$SCALE" "autovacuum = off"
DATA_BYTES=$(du -sb --exclude=pg_wal "$SRC" | cut -f1)
ROWS_TOTAL=$((SCALE * 100000))
[ "$CHANGE_ROWS" -lt "$ROWS_TOTAL" ] || CHANGE_ROWS=$((ROWS_TOTAL / 100))

# timed_pg OUT CMD...: run as postgres; sets T_WALL T_RSS_MIB T_IN_BYTES, T_RC.
timed_pg() {
    local out=$1 tf=$BENCH_TMP/time.rl
    shift
    T_RC=0
    rm -f "$tf"
    _pb_as_pg /usr/bin/time -f '%e %M %I' -o "$tf" "$@" >"$out" 2>&1 || T_RC=$?
    local m i
    read -r T_WALL m i <<<"$(tail -n 1 "$tf")"
    T_RSS_MIB=$(awk -v m="$m" 'BEGIN {printf "%.1f", m / 1024}')
    T_IN_BYTES=$((i * 512))
}
pbt() {
    local cmd=$1
    shift
    timed_pg "$BENCH_TMP/pb.out" env PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres \
        PGDATABASE=postgres "$PB_BIN" "$cmd" "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" "$@"
    [ "$T_RC" = 0 ] || { tail -n 20 "$BENCH_TMP/pb.out" >&2; return 1; }
}
pgbrt() {
    timed_pg "$BENCH_TMP/pgbr.out" pgbackrest --config="$PGBR_CONF" --stanza=bench backup \
        --type="$1"
    [ "$T_RC" = 0 ] || { tail -n 20 "$BENCH_TMP/pgbr.out" >&2; return 1; }
}
change() {
    local x=$((1 + (RANDOM * 32768 + RANDOM) % (ROWS_TOTAL - CHANGE_ROWS)))
    pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1
                    WHERE aid BETWEEN $x AND $((x + CHANGE_ROWS - 1))" >/dev/null &&
        pg_psql "$SRC" "CHECKPOINT" >/dev/null && bench_wait_archived "$SRC"
}
pct() { awk -v a="$1" -v b="$DATA_BYTES" 'BEGIN {printf "%.2f", 100 * a / b}'; }

pgbrt full || pb_die "pgbackrest full failed"
ROWS_OUT=()
for rep in $(seq 1 "$BENCH_REPS"); do
    for mode in $MODES; do
        pbt backup --type full || pb_die "pageback full failed"
        change || pb_die "the change failed"
        bench_drop_caches
        pbt backup --incremental-mode "$mode" --verify-scan 0 || pb_die "pageback $mode failed"
        id=$(pb_last_id)
        read -r rd <<<"$(bench_pb_info "$id" bytes_read)"
        bench_rec kind=readless tool=pageback mode="$mode" scale="$SCALE" rep="$rep" \
            change_rows="$CHANGE_ROWS" data_bytes="$DATA_BYTES" bytes_read="$rd" \
            fs_in_bytes="$T_IN_BYTES" wall_s="$T_WALL" rss_mib="$T_RSS_MIB" id="$id"
        ROWS_OUT+=("pageback-$mode $rd $T_IN_BYTES $T_WALL $T_RSS_MIB")
        bench_drop_caches
        pgbrt incr || pb_die "pgbackrest incr failed"
        bench_rec kind=readless tool=pgbackrest scale="$SCALE" rep="$rep" \
            change_rows="$CHANGE_ROWS" data_bytes="$DATA_BYTES" fs_in_bytes="$T_IN_BYTES" \
            wall_s="$T_WALL" rss_mib="$T_RSS_MIB"
        ROWS_OUT+=("pgbackrest - $T_IN_BYTES $T_WALL $T_RSS_MIB")
    done
done

echo
echo "Incremental after $CHANGE_ROWS changed rows, pgbench scale $SCALE, data directory" \
    "$DATA_BYTES B, $BENCH_REPS rounds (every round listed):"
printf "%-16s %14s %8s %14s %8s %8s %8s\n" tool bytes_read "% data" fs_in_bytes "% data" \
    wall_s rss_mib
for r in "${ROWS_OUT[@]}"; do
    read -r tool rd in wall rss <<<"$r"
    printf "%-16s %14s %8s %14s %8s %8s %8s\n" "$tool" "$rd" \
        "$([ "$rd" = - ] && echo - || pct "$rd")" "$in" "$(pct "$in")" "$wall" "$rss"
done
cp "$BENCH_REC" "$BENCH_RESULTS/readless-s$SCALE.jsonl" 2>/dev/null || true
