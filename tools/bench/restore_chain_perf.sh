#!/bin/bash
# tools/bench/restore_chain_perf.sh — where the CPU of a chain restore goes, against the
# full alone: the same data as restore_chain.sh (pgbench, a full, BENCH_INCRS
# incrementals of BENCH_BATCH random transactions), then each restore once under
# `perf stat` (CPU seconds, pwrite/openat/fsync system calls) and once under
# `perf record -g`, its samples split by component (tools/bench/perf_breakdown.py: zstd,
# xxhash, the kernel side of pwrite/fsync/file creation/reads, manifest work, the rest).
# CPU seconds and counts, not wall time, are what it reports. For pageback's own frames
# in the profile build with frame pointers:
#   pb_build build-perf CFLAGS="-O2 -g -fno-omit-frame-pointer"
#   PB_BIN=build-perf/pageback BENCH_SCALE=20 BENCH_INCRS=30 tools/bench/restore_chain_perf.sh
# Restores go into fresh directories that are removed only at the end (file creation
# right after a large removal costs ext4 more, and would be charged to the next restore).
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-20}
INCRS=${BENCH_INCRS:-30}
BATCH=${BENCH_BATCH:-1000}
command -v perf >/dev/null || pb_die "perf is missing (linux-perf)"
bench_setup restore_chain_perf
bench_pgbr_prepare
bench_cluster "$SCALE"
pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_wait_archived "$SRC"
bench_pb backup --type full --pgdata "$SRC" || pb_die "full backup failed"
FULL_ID=$(pb_last_id)
for i in $(seq 1 "$INCRS"); do
    "$PB_PGBIN/pgbench" -n -t $((BATCH / 2)) -c 2 -j 2 -h "$PGHOST" -p "$PGPORT" -U postgres \
        postgres >"$BENCH_TMP/pgbench.out" 2>&1 || { cat "$BENCH_TMP/pgbench.out" >&2; pb_die "pgbench failed"; }
    bench_pb backup --type incr --pgdata "$SRC" || pb_die "incremental $i failed"
done
LAST_ID=$(pb_last_id)
pg_stop "$SRC"
PERF=$PB_WORK/perf
mkdir -p "$PERF"

# restore_under WHAT SET N TOOL...: restore SET into a fresh directory under TOOL.
restore_under() {
    local what=$1 set=$2 n=$3 d=$PB_WORK/restore.$1.$3
    shift 3
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    "$@" "$PB_BIN" restore "${PB_REPO_ARGS[@]}" --state-dir "$PERF/state" --target-dir "$d" \
        --set "$set" >"$PERF/$what.$n.out" 2>&1 || { cat "$PERF/$what.$n.out" >&2; return 1; }
}

# BENCH_BINS="old new": the same restores with each binary in turn, BENCH_REPS times
# each (report the lowest CPU); the profile (perf record) is of the last binary only.
BINS=${BENCH_BINS:-$PB_BIN}
REPS=${BENCH_REPS:-1}
k=0
for bin in $BINS; do
    for what in full chain; do
        set=$FULL_ID
        [ "$what" = chain ] && set=$LAST_ID
        for rep in $(seq 1 "$REPS"); do
            k=$((k + 1))
            PB_BIN=$bin restore_under "$what" "$set" "stat$k" perf stat -x, -o "$PERF/$what.stat" -e task-clock,user_time,system_time,syscalls:sys_enter_pwrite64,syscalls:sys_enter_openat,syscalls:sys_enter_fsync ||
                pb_die "restore of $what failed"
            line=$(grep -m1 '^restored backup' "$PERF/$what.stat$k.out")
            awk -F, -v what="$what" -v bin="$bin" -v frames="$(sed -n 's/.* \([0-9]*\) frames read.*/\1/p' <<<"$line")" '
                /task-clock/ {t = $1} /user_time/ {u = $1 / 1e6} /system_time/ {s = $1 / 1e6}
                /pwrite64/ {w = $1} /openat/ {o = $1} /fsync/ {f = $1}
                END {printf "%s %-5s CPU %.0f ms (user %.0f, system %.0f), %d frames decoded, %d pwrite, %d openat, %d fsync\n",
                     bin, what, t, u, s, frames, w, o, f}' "$PERF/$what.stat"
        done
    done
done
for what in full chain; do
    set=$FULL_ID
    [ "$what" = chain ] && set=$LAST_ID
    restore_under "$what" "$set" rec perf record -q -g -o "$PERF/$what.data" ||
        pb_die "restore of $what failed"
    perf script -i "$PERF/$what.data" -F period,ip,sym,dso 2>/dev/null |
        /usr/bin/python3 "$BENCH_DIR/perf_breakdown.py" "$what" "$PERF/$what.json" >/dev/null
done
echo
echo "CPU by component (perf record -g, cpu-clock samples), full + $INCRS incrementals, scale $SCALE:"
/usr/bin/python3 "$BENCH_DIR/perf_breakdown.py" --compare "$PERF/full.json" "$PERF/chain.json"
rm -rf "$PB_WORK"/restore.*
