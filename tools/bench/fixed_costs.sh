#!/bin/bash
# tools/bench/fixed_costs.sh — which per-backup fixed costs the database feels (issue 10).
# The same setup as impact.sh (PostgreSQL in a memory cgroup smaller than its database, a
# rate-limited point-select load, windows of WINDOW s: idle, the "tool" back to back, idle),
# but the tools are the pieces a backup is made of, so their per-second p99 can be told
# apart: flush (1 MiB write + fdatasync, 10/s), dirsync (4 KiB write, fdatasync, rename,
# directory fsync, 10/s), switchwal (an INSERT and pg_switch_wal(), 1/s: one archive push
# each), switchwal_nice (the same with archive_command under nice 10 / ionice -c2 -n7),
# checkpoint (CHECKPOINT, 1/s), pb_file (a pageback incremental in file mode: the fixed
# costs of a backup that reads almost nothing), pb_adaptive (a pageback full).
#   SCALE=60 WINDOW=10 BENCH_CG_MIB=300 \
#     BENCH_TOOLS="flush dirsync switchwal switchwal_nice checkpoint pb_file pb_adaptive" \
#     tools/bench/fixed_costs.sh
# Prints impact.sh's scenario 1 table; JSON in BENCH_RESULTS/exp.json, per-second p99 in
# BENCH_RESULTS/exp-p99.dat.
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
SCALE=${SCALE:-${BENCH_SCALE:-200}}
WINDOW=${WINDOW:-${BENCH_WINDOW:-60}}
RATE=${BENCH_RATE:-400}
CG_MIB=${BENCH_CG_MIB:-1024}
TOOLS=${BENCH_TOOLS:-"pb_adaptive pb_pinned pb_incr basebackup pgbackrest"}
CG_ROOT=/sys/fs/cgroup/memory
[ -w "$CG_ROOT" ] || pb_die "cgroup v1 memory controller not writable at $CG_ROOT"
command -v gnuplot >/dev/null || pb_log "WARNING: gnuplot missing (apt-get install -y gnuplot-nox): no PNG"

bench_setup impact
CG=$CG_ROOT/pageback-impact.$$
mkdir "$CG" || pb_die "cannot create $CG"
echo $((CG_MIB * 1024 * 1024)) >"$CG/memory.limit_in_bytes" || pb_die "cannot set the limit"
LOAD=
cg_cleanup() {
    [ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null
    [ -n "${SRC:-}" ] && [ -f "$SRC/postmaster.pid" ] &&
        _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$SRC" -m immediate -w stop >/dev/null 2>&1
    rmdir "$CG" 2>/dev/null
}
trap '_pb_rc=$?; cg_cleanup; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT

bench_pgbr_prepare
bench_cluster "$SCALE"
pgbr backup --type=full >/dev/null 2>&1 # a first full, so later ones are comparable
pb backup --type full >"$BENCH_TMP/first.out" 2>&1 || pb_die "first pageback backup failed"

IN_CG=$BENCH_TMP/in_cg
printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" && exec "$@"\n' "$CG" >"$IN_CG"
chmod 0755 "$IN_CG"
pg_stop "$SRC" || pb_die "stop failed"
"$IN_CG" runuser -u postgres -- "$PB_PGBIN/pg_ctl" -D "$SRC" -l "$(pg_logfile "$SRC")" -w start \
    >/dev/null || pb_die "start in the cgroup failed"
DEV=$(bench_disk_of "$SRC")
DEVSTAT=/sys/class/block/$DEV/stat
[ -r "$DEVSTAT" ] || DEVSTAT=/sys/block/$DEV/stat
read_sectors() { awk '{print $3}' "$DEVSTAT" 2>/dev/null || echo 0; }
DATA_MIB=$(du -sm "$SRC/base" | cut -f1)
pb_log "data $DATA_MIB MiB, cgroup $CG_MIB MiB, device $DEV, windows of $WINDOW s"

# ------------------------------------------------------------------ tools
pb_run() { pb backup "$@" >>"$BENCH_TMP/pb-runs.out" 2>&1; }
run_tool() {
    case $1 in
    pb_adaptive) pb_run --type full ;;
    pb_pinned) pb_run --type full --read-size 512k --queue-depth 2 ;;
    pb_incr) pb_run --type incr ;;
    basebackup)
        rm -rf "$BENCH_TMP/bb"
        _pb_as_pg "$PB_PGBIN/pg_basebackup" -h "$PGHOST" -p "$PGPORT" -U postgres \
            -D "$BENCH_TMP/bb" -Fp -X none -c fast >/dev/null 2>&1 ;;
    pgbackrest) pgbr backup --type=full >/dev/null 2>&1 ;;
    flush) python3 -c "
import os,time
fd=os.open('$PB_WORK/flushfile', os.O_WRONLY|os.O_CREAT, 0o644)
for i in range(10):
    os.pwrite(fd, os.urandom(1<<20), i<<20); os.fdatasync(fd); time.sleep(0.1)
os.close(fd)" ;;
    dirsync) python3 -c "
import os,time
for i in range(10):
    p='$PB_WORK/dirsync.%d' % i
    fd=os.open(p, os.O_WRONLY|os.O_CREAT, 0o644); os.write(fd, b'x'*4096); os.fdatasync(fd); os.close(fd)
    os.rename(p, p+'.done'); d=os.open('$PB_WORK', os.O_RDONLY); os.fsync(d); os.close(d); time.sleep(0.1)" ;;
    switchwal) pg_psql "$SRC" "CREATE TABLE IF NOT EXISTS sw(x int); INSERT INTO sw VALUES (1); SELECT pg_switch_wal()" >/dev/null; sleep 1 ;;
    checkpoint) pg_psql "$SRC" "CHECKPOINT" >/dev/null; sleep 1 ;;
    switchwal_nice) pg_psql "$SRC" "INSERT INTO sw VALUES (1); SELECT pg_switch_wal()" >/dev/null; sleep 1 ;;
    pb_file) pb_run --type incr --incremental-mode file ;;
    esac
}
# window NAME [TOOL]: WINDOW seconds idle, or TOOL back to back; one line per window
# "name start end read_bytes runs" in $WINDOWS.
WINDOWS=$PB_WORK/windows.txt
: >"$WINDOWS"
window() {
    local name=$1 tool=${2:-} s0 t0 t1 end runs=0
    bench_drop_caches
    sleep 2
    s0=$(read_sectors)
    t0=$(date +%s.%N)
    end=$(( $(date +%s) + WINDOW ))
    if [ -z "$tool" ]; then
        sleep "$WINDOW"
    else
        while [ "$(date +%s)" -lt "$end" ]; do run_tool "$tool"; runs=$((runs + 1)); done
    fi
    t1=$(date +%s.%N)
    echo "$name $t0 $t1 $(( ($(read_sectors) - s0) * 512 )) $runs" >>"$WINDOWS"
}

# ------------------------------------------------------------------ scenario 1
LOGDIR=$PB_WORK/lat
mkdir -p "$LOGDIR" && _pb_chown_pg "$LOGDIR"
NT=$(echo $TOOLS | wc -w)
TOTAL=$(( (WINDOW + 8) * (2 * NT + 1) + 30 ))
(cd "$LOGDIR" && exec "$PB_PGBIN/pgbench" -n -S -c 2 -j 2 -R "$RATE" -T "$TOTAL" -l \
    --log-prefix=lat -h "$PGHOST" -p "$PGPORT" -U postgres postgres >"$LOGDIR/pgbench.out" 2>&1) &
LOAD=$!
sleep 5
window "idle"
PUSH_CMD=${BENCH_ARCHIVE_COMMAND%% && pgbackrest*}
set_push() { pg_conf "$SRC" "archive_command = '${1//\'/\'\'}'" && pg_psql "$SRC" "SELECT pg_reload_conf()" >/dev/null; }
set_push "$PUSH_CMD"
for t in $TOOLS; do
    pb_log "scenario 1: $t"
    if [ "$t" = switchwal_nice ]; then set_push "nice -n 10 ionice -c2 -n7 $PUSH_CMD"; else set_push "$PUSH_CMD"; fi
    window "$t" "$t"
    window "after_$t"
done
kill "$LOAD" 2>/dev/null
wait "$LOAD" 2>/dev/null
LOAD=


IDLE=$PB_WORK/idle.txt
: >"$IDLE"
OUT=$BENCH_RESULTS/exp.json
/usr/bin/python3 "$BENCH_DIR/impact_report.py" "$LOGDIR" "$WINDOWS" "$IDLE" "$OUT" \
    "$BENCH_RESULTS/exp-p99.dat" "$WINDOW" "$SCALE" "$CG_MIB" "$DATA_MIB" || exit 1
