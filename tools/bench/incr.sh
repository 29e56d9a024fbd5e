#!/bin/bash
# tools/bench/incr.sh — incremental backups after updating 0.1%, 1% and 10% of
# pgbench_accounts (a contiguous range of aid per round, as in the field notes:
# UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid BETWEEN x AND y),
# pageback and pgBackRest 2.45 (--type=incr, zst, process-max=2) side by side.
#
# For every round the script itself hashes every 8 kB page of the relation files
# (after a CHECKPOINT, with autovacuum off so nothing else writes) before and after
# the update: "pages really changed" is that independent count, to compare with what
# pageback says it shipped (pages_changed). Stored bytes: pageback's bytes_stored +
# the manifest object (backup/<id>/manifest); pgBackRest: its backup directory for
# that incremental (du -sb). The reference "zstd -1 of the changed pages" is the
# really-changed pages concatenated and compressed once.
#
# Each fraction runs BENCH_REPS rounds, each an incremental on top of the previous
# backup of the same tool; within a round the tools alternate which goes first, and
# fio reads the same relation files (pageback's request size and queue depth) between
# them: "wall vs raw read" is pageback's wall time over that round's fio time.
#
#   tools/bench/incr.sh                    # scale 100 (10 M rows), fractions 0.1 1 10
#   BENCH_FRACTIONS="1" BENCH_REPS=2 tools/bench/incr.sh
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-100}
FRACTIONS=${BENCH_FRACTIONS:-0.1 1 10}
[ "$SCALE" -ge 100 ] || pb_log "WARNING: scale $SCALE < 100: changes are too small to mean much"

bench_setup incr
bench_pgbr_prepare
# autovacuum off: the only writes between two hash snapshots are the benchmark's.
bench_cluster "$SCALE" "autovacuum = off"
bench_tune "$SRC"
ROWS_TOTAL=$((SCALE * 100000))

mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }

# pageback_backup TYPE: timed, sets PB_ID and prints nothing.
pageback_backup() {
    bench_pb backup --type "$1" --pgdata "$SRC" || return 1
    PB_ID=$(pb_last_id)
}

# ---------------------------------------------------------------- full backups
pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_wait_archived "$SRC"
bench_drop_caches
bench_fio "$SRC" "$BENCH_READ_KIB" "$BENCH_QD" || pb_die "fio failed"
bench_rec kind=raw pct=full wall_s="$T_WALL" fio_s="$RAW_S" mib_s="$RAW_MIBS" bytes="$RAW_BYTES"
pb_log "raw O_DIRECT read: $(mib "$RAW_BYTES") MiB in ${T_WALL}s (fio ${RAW_S}s)"

bench_drop_caches
pageback_backup full || pb_die "pageback full backup failed"
read -r stored <<<"$(bench_pb_info "$PB_ID" bytes_stored)"
bench_rec kind=full tool=pageback wall_s="$T_WALL" stored_bytes="$stored" id="$PB_ID"
pb_log "pageback full: ${T_WALL}s, stored $(mib "$stored") MiB"
bench_drop_caches
bench_pgbr_backup full || pb_die "pgbackrest full backup failed"
bench_rec kind=full tool=pgbackrest wall_s="$T_WALL" \
    stored_bytes="$(bench_pgbr_stored "$PGBR_LABEL")" label="$PGBR_LABEL"
pb_log "pgbackrest full: ${T_WALL}s"

pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_py pagehash "$SRC" "$PB_WORK/hash.prev" || pb_die "pagehash failed"

# ---------------------------------------------------------------- rounds
run_pageback_incr() {
    local changed scanned stored read secs man dir
    bench_drop_caches
    pageback_backup incr || return 1
    read -r changed scanned stored read secs <<<"$(bench_pb_info "$PB_ID" pages_changed \
        pages_scanned bytes_stored bytes_read seconds)"
    man=$(stat -c %s "$PB_REPO/backup/$PB_ID/manifest")
    dir=$(du -sb "$PB_REPO/backup/$PB_ID" | cut -f1)
    bench_rec kind=incr tool=pageback pct="$PCT" rep="$REP" rows="$ROWS" \
        pages_differ="$DIFFER" pages_new="$NEW" zstd_changed_bytes="$ZSTD_BYTES" \
        pages_changed="$changed" pages_scanned="$scanned" stored_bytes="$stored" \
        manifest_bytes="$man" total_bytes="$((stored + man))" dir_bytes="$dir" \
        bytes_per_changed_page="$(awk -v t="$((stored + man))" -v p="$DIFFER" \
            'BEGIN {if (p) printf "%.1f", t / p; else print "null"}')" \
        missed_pages="$((DIFFER > changed ? DIFFER - changed : 0))" \
        extra_pages="$((changed > DIFFER ? changed - DIFFER : 0))" \
        bytes_read="$read" inner_s="$secs" wall_s="$T_WALL" cpu_s="$T_CPU" \
        rss_mib="$T_RSS_MIB" id="$PB_ID"
    pb_log "  pageback: $changed pages shipped (really changed $DIFFER)," \
        "stored $((stored + man)) B, ${T_WALL}s"
}

run_pgbackrest_incr() {
    local dir size repo delta
    bench_drop_caches
    bench_pgbr_backup incr || return 1
    read -r size repo delta _ <<<"$(bench_py pgbr-info "$BENCH_TMP/pgbr-info.json" "$PGBR_LABEL")"
    dir=$(bench_pgbr_stored "$PGBR_LABEL")
    bench_rec kind=incr tool=pgbackrest pct="$PCT" rep="$REP" rows="$ROWS" \
        pages_differ="$DIFFER" stored_bytes="$delta" total_bytes="$dir" \
        bytes_per_changed_page="$(awk -v t="$dir" -v p="$DIFFER" \
            'BEGIN {if (p) printf "%.1f", t / p; else print "null"}')" \
        repo_delta_bytes="$delta" wall_s="$T_WALL" cpu_s="$T_CPU" rss_mib="$T_RSS_MIB" \
        label="$PGBR_LABEL"
    pb_log "  pgbackrest: stored $dir B, ${T_WALL}s"
}

# The raw read of this round: fio over the same relation files, same request size
# and queue depth as pageback.
run_raw_read() {
    bench_drop_caches
    bench_fio "$SRC" "$BENCH_READ_KIB" "$BENCH_QD" || return 1
    bench_rec kind=raw pct="$PCT" rep="$REP" wall_s="$T_WALL" fio_s="$RAW_S" \
        mib_s="$RAW_MIBS" bytes="$RAW_BYTES"
    pb_log "  raw read (fio): ${RAW_S}s, $RAW_MIBS MiB/s"
}

ROUND=0
for PCT in $FRACTIONS; do
    ROWS=$(awk -v n="$ROWS_TOTAL" -v p="$PCT" 'BEGIN {printf "%d", n * p / 100}')
    for REP in $(seq 1 "$BENCH_REPS"); do
        ROUND=$((ROUND + 1))
        # A different contiguous range each round, spread over the table.
        X=$((1 + (ROUND * 2654435761) % (ROWS_TOTAL - ROWS)))
        pb_log "round $ROUND: $PCT% = $ROWS rows, aid $X..$((X + ROWS - 1))"
        pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1
                        WHERE aid BETWEEN $X AND $((X + ROWS - 1))" >/dev/null ||
            pb_die "update failed"
        pg_psql "$SRC" "CHECKPOINT" >/dev/null
        read -r DIFFER NEW <<<"$(bench_py pagehash "$SRC" "$PB_WORK/hash.new" \
            --prev "$PB_WORK/hash.prev" --changed-out "$PB_WORK/changed.pages" |
            /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["pages_differ"], d["pages_new"])')"
        ZSTD_BYTES=$(zstd -1 -q -c "$PB_WORK/changed.pages" | wc -c)
        rm -f "$PB_WORK/changed.pages"
        mv "$PB_WORK/hash.new" "$PB_WORK/hash.prev"
        pb_log "  really changed: $DIFFER pages ($NEW new), zstd -1 of them $ZSTD_BYTES B"
        bench_wait_archived "$SRC"
        if [ $((REP % 2)) = 1 ]; then
            run_pageback_incr && run_raw_read && run_pgbackrest_incr || pb_die "backup failed"
        else
            run_pgbackrest_incr && run_raw_read && run_pageback_incr || pb_die "backup failed"
        fi
    done
done

echo
echo "Incremental backups, pgbench scale $SCALE, $BENCH_REPS rounds per fraction (medians):"
bench_report incr
