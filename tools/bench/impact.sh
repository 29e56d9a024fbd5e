#!/bin/bash
# tools/bench/impact.sh — what a backup costs the database (the field
# experiment as a tool). PostgreSQL runs in a cgroup v1 memory cgroup smaller than its
# database, so a rate-limited point-select load (pgbench -S -R RATE) keeps missing the
# cache and reading the disk. Three scenarios, one run:
#   1. Under load: windows of WINDOW s — idle before, the tool back to back, idle
#      after — for dd O_DIRECT (512 KiB, one in flight, over the relation files: the
#      physical reference), pageback (adaptive defaults), pageback with the I/O class left
#      alone (--io-class default: what the idle class buys, by difference), pageback
#      pinned to the old defaults (512 KiB x 2), pageback incremental with nothing
#      changed, pg_basebackup -Fp and pgBackRest full. p50/p99 per window from pgbench's
#      per-transaction log, ratio of the tool's p99 to the idle window before it, the
#      device's read rate less the idle window's (the tool's read rate under load) and
#      that rate against dd's. pageback's own account of what its reads cost the
#      database (the "cost to others' reads" line) is in impact-runs.log.
#   2. Idle database: pageback's read rate against dd O_DIRECT at the best request size
#      over the same relation files; CPU seconds per GB; peak RSS.
#   3. An idle hot table left in the cache: its residency (fincore) after a backup.
# Tables on stdout, JSON in BENCH_RESULTS/impact.json, per-second p99 of scenario 1 as
# docs-ready PNG (gnuplot) in BENCH_RESULTS/impact-p99.png.
#   SCALE (default 200)  WINDOW (default 60 s)  BENCH_RATE (400 tps)
#   BENCH_CG_MIB (cgroup limit, default 1024)  BENCH_TOOLS (default: all seven)
#   PAGEBACK_READ_BUDGET (passed through: the ratio pageback steers others' latency to)
#   BENCH_SCENARIOS (default 123)  BENCH_IDLE_REPS (scenario 2's rounds, default 3)
#   BENCH_OLD_BIN: the binary of the pb_old tool (a full with another build, side by side)
#   BENCH_PB_OPTS, BENCH_PB_OPTS2: the options of the pb_opts and pb_opts2 tools (a full with
#   one setting changed)
# Where a full's cost under load comes from (docs/BENCHMARKS.md, "piece by piece"):
#   fio_<size>_<depth>[_idle]  a plain reader's frontier (fio O_DIRECT, sequential, io_uring)
#   pbpin_<size>_<depth>[_idle]  pageback pinned to the same (its CPU work included)
#   cpu_idle_N, cpu_share_P  CPU alone at SCHED_IDLE: N busy processes, one busy P%
#   read_cpu  fio_128k_1_idle beside cpu_share_45 (a plain reader plus a backup's CPU)
#   pb_shm  pageback into a repository on tmpfs (its writes off the database's disk)
#   pg_api_4, pb_incr_4  PostgreSQL's backup API, and an incremental, once every 4 s
#   pb_opts2  like pb_opts, with BENCH_PB_OPTS2
# The fixed costs a backup is made of, piece by piece, under the same load:
#   BENCH_SCENARIOS=1 BENCH_TOOLS="flush dirsync switchwal switchwal_nice checkpoint pb_file pg_api"
# flush: 1 MiB write + fdatasync, 10/s; dirsync: 4 KiB write, fdatasync, rename, directory
# fsync, 10/s; switchwal: an INSERT and pg_switch_wal() (one archive push), 1/s;
# switchwal_nice: the same with archive_command under nice 10 / ionice -c2 -n7;
# checkpoint: CHECKPOINT, 1/s; pb_file: a pageback incremental in file mode (reads ~nothing);
# pg_api: pg_backup_start + pg_backup_stop back to back, the floor every tool's backup pays.
# Smoke run: SCALE=5 WINDOW=10 BENCH_CG_MIB=256 tools/bench/impact.sh
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
SCALE=${SCALE:-${BENCH_SCALE:-200}}
WINDOW=${WINDOW:-${BENCH_WINDOW:-60}}
RATE=${BENCH_RATE:-400}
CG_MIB=${BENCH_CG_MIB:-1024}
TOOLS=${BENCH_TOOLS:-"dd_direct pb_adaptive pb_noidle pb_pinned pb_incr basebackup pgbackrest"}
CG_ROOT=/sys/fs/cgroup/memory
[ -w "$CG_ROOT" ] || pb_die "cgroup v1 memory controller not writable at $CG_ROOT"
command -v gnuplot >/dev/null || pb_log "WARNING: gnuplot missing (apt-get install -y gnuplot-nox): no PNG"

bench_setup impact
CG=$CG_ROOT/pageback-impact.$$
mkdir "$CG" || pb_die "cannot create $CG"
echo $((CG_MIB * 1024 * 1024)) >"$CG/memory.limit_in_bytes" || pb_die "cannot set the limit"
LOAD=
SHM_REPO=/dev/shm/pageback-impact.$$/repo
cg_cleanup() {
    rm -rf "$(dirname "$SHM_REPO")"
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
# The relation files dd reads (scenario 1's reference line, scenario 2's sizes).
mapfile -t FILES < <(find "$SRC/base" -type f -size +1M | sort)
pb_log "data $DATA_MIB MiB, cgroup $CG_MIB MiB, device $DEV, windows of $WINDOW s"

# ------------------------------------------------------------------ tools
pb_run() {
    echo "== $(date +%T) backup $*" >>"$BENCH_TMP/pb-runs.out"
    pb backup --log-level detail "$@" >>"$BENCH_TMP/pb-runs.out" 2>&1
}
run_tool() {
    case $1 in
    # The physical reference: what the disk gives one plain reader, no pause, no priority.
    dd_direct) for f in "${FILES[@]}"; do
                   dd if="$f" of=/dev/null bs=512K iflag=direct status=none; done ;;
    pb_adaptive) pb_run --type full ;;
    pb_noidle) pb_run --type full --io-class default ;;
    # A full with BENCH_PB_OPTS (e.g. "--cpu-priority normal"): one setting measured alone.
    pb_opts) pb_run --type full ${BENCH_PB_OPTS:-} ;;
    pb_opts2) pb_run --type full ${BENCH_PB_OPTS2:-} ;;
    # The same full with another binary (BENCH_OLD_BIN, e.g. the one a change started from),
    # into the same repository: a change measured side by side in one run.
    pb_old) PB_BIN=${BENCH_OLD_BIN:?pb_old needs BENCH_OLD_BIN} pb_run --type full ;;
    pb_pinned) pb_run --type full --read-size 512k --queue-depth 2 ;;
    pb_incr) pb_run --type incr ;;
    # An incremental every 4 s (the default spread checkpoint): back to back, its fixed
    # costs (a checkpoint, a WAL switch, an archive push) come 10-50 times a window; paced,
    # the window holds what one incremental costs, as pg_api_4 holds the API's.
    pb_incr_4) sleep 4 & local pacer=$!
        pb_run --type incr; wait "$pacer" ;;
    # The frontier a plain reader has on this disk: fio_<size>_<depth>[_idle], e.g.
    # fio_128k_2_idle = 128 KiB requests, two in flight, idle I/O class, O_DIRECT,
    # sequential over the same files as dd; pbpin_<size>_<depth>[_idle]: pageback pinned
    # to the same (its own CPU work included), to tell the device's cost from pageback's.
    fio_*) local a b c; IFS=_ read -r _ a b c <<<"$1"
        fio --name=ref --filename="$(IFS=:; echo "${FILES[*]}")" --file_service_type=sequential \
            --rw=read --bs="$a" --iodepth="$b" --direct=1 --ioengine=io_uring \
            ${c:+--prioclass=3} --output=/dev/null >/dev/null 2>&1 ;;
    pbpin_*) local a b c; IFS=_ read -r _ a b c <<<"$1"
        pb_run --type full --read-size "$a" --queue-depth "$b" --io-class "${c:-default}" ;;
    # What a backup's CPU alone costs: N busy SCHED_IDLE processes for 4 s, no I/O;
    # cpu_share_P: one SCHED_IDLE process busy P% of the time in 1 ms bursts (pageback's
    # threads use 40-50% of one CPU at 230 MB/s).
    cpu_idle_*) local n=${1#cpu_idle_} i pids=()
        for i in $(seq 1 "$n"); do chrt -i 0 timeout 4 sha256sum /dev/zero & pids+=($!); done
        wait "${pids[@]}" ;; # not a bare wait: the load is this shell's child too
    cpu_share_*) chrt -i 0 /usr/bin/python3 "$BENCH_DIR/bench.py" burn 4 "0.${1#cpu_share_}" ;;
    # What the repository's writes cost: the same full into a repository on tmpfs (its
    # WAL archived there too, by archive_for), nothing written to the database's disk.
    pb_shm) (PB_REPO_ARGS=(--repo "$SHM_REPO") PB_STATE=$SHM_REPO.state; pb_run --type full) ;;
    basebackup)
        rm -rf "$BENCH_TMP/bb"
        _pb_as_pg "$PB_PGBIN/pg_basebackup" -h "$PGHOST" -p "$PGPORT" -U postgres \
            -D "$BENCH_TMP/bb" -Fp -X none -c fast >/dev/null 2>&1 ;;
    pgbackrest) pgbr backup --type=full >/dev/null 2>&1 ;;
    # The pieces a backup is made of, each repeated (BENCH_SCENARIOS=1 runs them alone):
    flush) bench_py flush "$PB_WORK/flushfile" 10 1048576 0.1 ;;
    dirsync) bench_py dirsync "$PB_WORK" 10 0.1 ;;
    switchwal | switchwal_nice)
        pg_psql "$SRC" "CREATE TABLE IF NOT EXISTS sw (x int); INSERT INTO sw VALUES (1);
                        SELECT pg_switch_wal()" >/dev/null 2>&1; sleep 1 ;;
    checkpoint) pg_psql "$SRC" "CHECKPOINT" >/dev/null; sleep 1 ;;
    pb_file) pb_run --type incr --incremental-mode file ;;
    # What PostgreSQL's side of any backup costs on its own: pg_backup_start (a spread
    # checkpoint) and pg_backup_stop (a WAL switch, waiting for its archive push), nothing
    # read or written by a tool. No tool's backup can cost the database less than this.
    # The same at a backup's cadence: pg_backup_start, 4 s (a full of this size under
    # load), pg_backup_stop: what the API alone adds to a window of back-to-back fulls.
    pg_api_4) "$PB_PGBIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$(pg_sockdir "$SRC")" \
                -p "$(pg_port "$SRC")" -U postgres -d postgres \
                -c "SELECT pg_backup_start('impact', false)" -c "SELECT pg_sleep(4)" \
                -c "SELECT lsn FROM pg_backup_stop(true)" >/dev/null 2>&1 ;;
    # A plain reader and a backup's CPU at once: fio_128k_1_idle beside cpu_share_45.
    read_cpu) run_tool cpu_share_45 & local burner=$!
        run_tool fio_128k_1_idle; wait "$burner" ;;
    pg_api) "$PB_PGBIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$(pg_sockdir "$SRC")" \
                -p "$(pg_port "$SRC")" -U postgres -d postgres \
                -c "SELECT pg_backup_start('impact', false)" \
                -c "SELECT lsn FROM pg_backup_stop(true)" >/dev/null 2>&1 ;;
    esac
}
# Each tool's windows archive WAL to that tool's repository only: with both archive_commands
# chained (as bench_cluster sets them up), every segment a backup switches would cost the
# database two archive pushes, one of them for the other tool.
archive_for() {
    local cmd=$BENCH_PB_PUSH
    [ "$1" = pgbackrest ] && cmd=$BENCH_PGBR_PUSH
    [ "$1" = switchwal_nice ] && cmd="nice -n 10 ionice -c2 -n7 $BENCH_PB_PUSH"
    if [ "$1" = pb_shm ]; then
        cmd="$PB_BIN archive-push %p --repo $SHM_REPO"
        install -d -o postgres -m 0750 "$(dirname "$SHM_REPO")" "$SHM_REPO" "$SHM_REPO.state" ||
            pb_die "cannot create the tmpfs repository $SHM_REPO"
    fi
    pg_conf "$SRC" "archive_command = '${cmd//\'/\'\'}'" &&
        pg_psql "$SRC" "SELECT pg_reload_conf()" >/dev/null
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
# exec: $! is then pgbench itself, so the kill below ends the load (a subshell's kill left
# pgbench running into scenario 2, which then measured a loaded database as idle).
(cd "$LOGDIR" && exec "$PB_PGBIN/pgbench" -n -S -c 2 -j 2 -R "$RATE" -T "$TOTAL" -l \
    --log-prefix=lat -h "$PGHOST" -p "$PGPORT" -U postgres postgres >"$LOGDIR/pgbench.out" 2>&1) &
LOAD=$!
sleep 5
window "idle"
for t in $TOOLS; do
    pb_log "scenario 1: $t"
    archive_for "$t"
    window "$t" "$t"
    window "after_$t"
done
kill "$LOAD" 2>/dev/null
wait "$LOAD" 2>/dev/null
# This run's pgbench, by its pid: another user's pgbench on a shared machine is not ours.
kill -0 "$LOAD" 2>/dev/null && pb_die "pgbench still runs: scenario 2 would not be idle"
LOAD=
SCENARIOS=${BENCH_SCENARIOS:-123}
cp "$BENCH_TMP/pb-runs.out" "$BENCH_RESULTS/impact-runs.log" 2>/dev/null # the tools' logs
archive_for pageback

# ------------------------------------------------------------------ scenario 2
IDLE=$PB_WORK/idle.txt
: >"$IDLE"
if [[ $SCENARIOS == *2* ]]; then
pb_log "scenario 2: idle database, pageback vs dd O_DIRECT"
: >"$BENCH_RESULTS/impact-idle.log"
# The virtual disk's rate moves by 2x from one pass to the next (the host's cache):
# dd at every size and pageback alternate, BENCH_IDLE_REPS times; the best of each counts.
for rep in $(seq 1 "${BENCH_IDLE_REPS:-3}"); do
    for bs in 128K 256K 512K 1M 2M 4M; do
        bench_drop_caches
        t0=$(date +%s.%N)
        for f in "${FILES[@]}"; do dd if="$f" of=/dev/null bs="$bs" iflag=direct status=none; done
        t1=$(date +%s.%N)
        echo "dd_$bs $t0 $t1 $(cat "${FILES[@]}" | wc -c)" >>"$IDLE"
    done
    bench_drop_caches
    bench_pb backup --type full || pb_die "idle pageback backup failed"
    MBS=$(sed -n 's/.*scanned \([0-9.]*\) MiB in \([0-9.]*\) s.*/\1 \2/p' "$BENCH_TMP/pb.out" | tail -n 1)
    echo "pageback $MBS $T_CPU $T_RSS_MIB" >>"$IDLE"
    cat "$BENCH_TMP/pb.out" >>"$BENCH_RESULTS/impact-idle.log"
done

fi

# ------------------------------------------------------------------ scenario 3
if [[ $SCENARIOS == *3* ]]; then
pb_log "scenario 3: hot table residency"
# The table is frozen and left alone by autovacuum before it is cached: otherwise the
# database's own first pass over it (hint bits, then VACUUM, each page's first change after
# the backup's checkpoint a full-page image in WAL, archived from inside the cgroup) reads,
# dirties and writes tens of MiB in the cgroup while the backup runs, and evicts the table
# whatever the backup does (residency after varied 0-45% so; 97.7% without a VACUUM
# even where nothing else ran). The control line measures what is evicted without a backup.
pg_psql "$SRC" "CREATE TABLE hot WITH (autovacuum_enabled = off) AS SELECT g AS id, \
    md5(g::text) AS v FROM generate_series(1, $(( CG_MIB * 1024 * 1024 / 8 / 80 ))) g" >/dev/null &&
    pg_psql "$SRC" "VACUUM (FREEZE, ANALYZE) hot" >/dev/null &&
    pg_psql "$SRC" "CHECKPOINT" >/dev/null && pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
bench_wait_archived "$SRC"
HOT=$SRC/$(pg_psql "$SRC" "SELECT pg_relation_filepath('hot')")
bench_drop_caches
for _ in 1 2 3; do pg_psql "$SRC" "SELECT count(*) FROM hot" >/dev/null; done
res() { fincore -b -n -o RES,SIZE "$HOT"* | awk '{r += $1; s += $2} END {printf "%.1f", 100 * r / s}'; }
RC0=$(res)
sleep 10 # the control: what the idle database evicts by itself in a backup's time
RC1=$(res)
echo "hot_control $RC0 $RC1" >>"$IDLE"
R0=$(res)
cg_mem() { echo "== $1"; cat "$CG/memory.usage_in_bytes"; grep -E "^(cache|rss|shmem|dirty|active_file|inactive_file) " "$CG/memory.stat"; }
cg_mem before >"$BENCH_RESULTS/impact-hot.log"
pb backup --type full >"$BENCH_TMP/hot.out" 2>&1 || pb_die "hot-table backup failed"
R1=$(res)
{ cg_mem after; echo "== residency $R0 -> $R1"; cat "$BENCH_TMP/hot.out"; } >>"$BENCH_RESULTS/impact-hot.log"
echo "hot $R0 $R1" >>"$IDLE"
fi

# ------------------------------------------------------------------ report
OUT=$BENCH_RESULTS/impact.json
/usr/bin/python3 "$BENCH_DIR/impact_report.py" "$LOGDIR" "$WINDOWS" "$IDLE" "$OUT" \
    "$BENCH_RESULTS/impact-p99.dat" "$WINDOW" "$SCALE" "$CG_MIB" "$DATA_MIB" || exit 1
if command -v gnuplot >/dev/null; then
    gnuplot -e "set terminal png size 1200,500 noenhanced; set output '$BENCH_RESULTS/impact-p99.png';
        set xlabel 'seconds into the window'; set ylabel 'p99 latency, ms (per second)';
        set logscale y; set key outside" "$BENCH_RESULTS/impact-p99.dat.gp" &&
        echo "chart: $BENCH_RESULTS/impact-p99.png"
fi
echo "results: $OUT"
