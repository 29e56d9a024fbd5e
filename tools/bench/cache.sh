#!/bin/bash
# tools/bench/cache.sh — page-cache impact of a backup in a memory-limited cgroup (v1).
#
# The PostgreSQL server runs inside a memory cgroup (memory.limit_in_bytes =
# BENCH_CG_MIB, default 768 MiB) with a data directory twice that size or more. A
# "hot" table (BENCH_HOT_MIB, default ~200 MiB) is read three times (sequential scans
# bigger than shared_buffers/4 go through the OS page cache, so its pages become
# active page cache charged to the cgroup). Then one reader runs inside the same
# cgroup, and the script measures, with fincore, how much of the hot table is still
# resident, and how long the first scan of the hot table takes afterwards:
#   pageback       backup --type full (O_DIRECT)
#   pg_basebackup  -Fp into a directory (the server reads buffered)
#   cat            cat of every relation file to /dev/null (a plain buffered reader)
#   pgbackrest     2.45 --type=full, zst, process-max=2
# Every repetition runs every reader once, in a rotated order, after dropping caches.
#
#   tools/bench/cache.sh                          # scale 100, 768 MiB cgroup
#   BENCH_CG_MIB=1024 BENCH_HOT_MIB=300 tools/bench/cache.sh
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-100}
CG_MIB=${BENCH_CG_MIB:-768}
HOT_MIB=${BENCH_HOT_MIB:-200}
CG_ROOT=/sys/fs/cgroup/memory
[ -w "$CG_ROOT" ] || pb_die "cgroup v1 memory controller not writable at $CG_ROOT"

bench_setup cache
CG=$CG_ROOT/pageback-bench.$$
mkdir "$CG" || pb_die "cannot create $CG"
echo $((CG_MIB * 1024 * 1024)) >"$CG/memory.limit_in_bytes" || pb_die "cannot set the limit"
cg_cleanup() {
    [ -n "${SRC:-}" ] && [ -f "$SRC/postmaster.pid" ] &&
        _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$SRC" -m immediate -w stop >/dev/null 2>&1
    rmdir "$CG" 2>/dev/null
}
trap '_pb_rc=$?; cg_cleanup; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT

bench_pgbr_prepare
bench_cluster "$SCALE"

# in_cg CMD...: run CMD (as root) inside the cgroup; a script, so /usr/bin/time can run it.
IN_CG=$BENCH_TMP/in_cg
printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" && exec "$@"\n' "$CG" >"$IN_CG"
chmod 0755 "$IN_CG"

# Restart the server inside the cgroup: every backend's page cache is charged there.
pg_stop "$SRC" || pb_die "stop failed"
"$IN_CG" runuser -u postgres -- "$PB_PGBIN/pg_ctl" -D "$SRC" -l "$(pg_logfile "$SRC")" -w start \
    >/dev/null || pb_die "start in the cgroup failed"

HOT_ROWS=$((HOT_MIB * 1024 * 1024 / 80))
pg_psql "$SRC" "CREATE TABLE hot AS SELECT g AS id, md5(g::text) AS v, now() AS t
                FROM generate_series(1, $HOT_ROWS) g" >/dev/null || pb_die "hot table"
pg_psql "$SRC" "VACUUM ANALYZE hot" >/dev/null && pg_psql "$SRC" "CHECKPOINT" >/dev/null
HOT_FILE=$SRC/$(pg_psql "$SRC" "SELECT pg_relation_filepath('hot')")
pb_log "hot table: $(du -cm "$HOT_FILE"* | tail -n 1 | cut -f1) MiB, cgroup limit $CG_MIB MiB," \
    "relation files $(du -sm "$SRC/base" | cut -f1) MiB"
bench_rec kind=setup scale="$SCALE" cg_limit_mib="$CG_MIB" \
    hot_mib="$(du -cm "$HOT_FILE"* | tail -n 1 | cut -f1)" data_mib="$(du -sm "$SRC/base" | cut -f1)"

hot_pct() {
    local r s
    read -r r s <<<"$(fincore -b -n -o RES,SIZE "$HOT_FILE"* | awk '{r += $1; s += $2} END {print r, s}')"
    awk -v r="$r" -v s="$s" 'BEGIN {printf "%.1f", 100 * r / s}'
}
hot_scan_s() {
    local t0 t1
    t0=$(date +%s.%N)
    pg_psql "$SRC" "SELECT count(*) FROM hot" >/dev/null
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'
}

read_pageback() {
    bench_time "$IN_CG" runuser -u postgres -- env PGHOST="$PGHOST" PGPORT="$PGPORT" \
        PGUSER=postgres "$PB_BIN" backup "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" \
        --type full --pgdata "$SRC" >"$BENCH_TMP/pb.out" 2>&1
}
read_basebackup() {
    rm -rf "$BENCH_TMP/bb"
    bench_time "$IN_CG" runuser -u postgres -- "$PB_PGBIN/pg_basebackup" -D "$BENCH_TMP/bb" -Fp \
        -X stream -c fast -h "$PGHOST" -p "$PGPORT" -U postgres >"$BENCH_TMP/bb.out" 2>&1
    rm -rf "$BENCH_TMP/bb"
}
read_cat() {
    bench_relfiles "$SRC" >"$BENCH_TMP/files"
    bench_time "$IN_CG" xargs -a "$BENCH_TMP/files" -d '\n' cat >/dev/null
}
read_pgbackrest() {
    bench_time "$IN_CG" runuser -u postgres -- pgbackrest --config="$PGBR_CONF" --stanza=bench \
        backup --type=full >"$BENCH_TMP/pgbr.out" 2>&1
}

READERS=(pageback basebackup cat pgbackrest)
n=${#READERS[@]}
for REP in $(seq 1 "$BENCH_REPS"); do
    for i in $(seq 0 $((n - 1))); do
        r=${READERS[$(((i + REP - 1) % n))]}
        pg_psql "$SRC" "CHECKPOINT" >/dev/null
        bench_wait_archived "$SRC"
        bench_drop_caches
        for k in 1 2 3; do pg_psql "$SRC" "SELECT count(*) FROM hot" >/dev/null; done
        warm_s=$(hot_scan_s)
        before=$(hot_pct)
        echo 0 >"$CG/memory.max_usage_in_bytes" 2>/dev/null
        # Sample the hot table's residency while the reader runs: the buffered readers
        # also read the hot table itself at some point, which brings it back, so the
        # residency at the end alone would hide an eviction in the middle.
        : >"$BENCH_TMP/samples"
        touch "$BENCH_TMP/sampling"
        (while [ -e "$BENCH_TMP/sampling" ]; do hot_pct >>"$BENCH_TMP/samples"; echo >>"$BENCH_TMP/samples"; sleep 0.2; done) &
        sampler=$!
        "read_$r"
        rm -f "$BENCH_TMP/sampling"
        wait "$sampler"
        read -r hot_min hot_mean <<<"$(awk 'NF {n++; s += $1; if (n == 1 || $1 < m) m = $1}
            END {printf "%.1f %.1f\n", m, n ? s / n : 0}' "$BENCH_TMP/samples")"
        [ "$T_RC" = 0 ] || pb_die "reader $r failed (exit $T_RC)"
        after=$(hot_pct)
        after_s=$(hot_scan_s)
        read -r res _ <<<"$(bench_cached "$SRC")"
        bench_rec kind=cache tool="$r" rep="$REP" hot_before_pct="$before" hot_after_pct="$after" \
            hot_min_pct="$hot_min" hot_mean_pct="$hot_mean" \
            hot_scan_warm_s="$warm_s" hot_scan_after_s="$after_s" wall_s="$T_WALL" \
            data_cached_mib="$(awk -v b="$res" 'BEGIN {printf "%.1f", b / 1048576}')" \
            cg_limit_mib="$CG_MIB" \
            cg_max_usage_mib="$(awk '{printf "%.1f", $1 / 1048576}' "$CG/memory.max_usage_in_bytes")"
        pb_log "rep $REP $r: hot table resident $before% -> $after% (lowest during $hot_min%," \
            "mean $hot_mean%), first scan after" \
            "${after_s}s (warm ${warm_s}s), reader ${T_WALL}s"
    done
done

echo
echo "Page cache: hot table residency through a backup in a $CG_MIB MiB memory cgroup," \
    "pgbench scale $SCALE, $BENCH_REPS repetitions (medians):"
bench_report cache
