# tools/bench/lib.sh — shared helpers of pageback's benchmark scripts.
#
# Sourced by tools/bench/*.sh. Builds on tests/integration/pb_lib.sh (work directory,
# clusters, `pb` running pageback as postgres) and adds: timing with /usr/bin/time,
# cache dropping, page-cache residency (fincore), a pgBackRest stanza of its own, and
# measurement records (JSON lines) that bench.py turns into tables and results JSON.
#
# Environment:
#   PB_BIN         pageback binary (default build/pageback of this checkout)
#   BENCH_REPS     repetitions of every measurement (default 3)
#   BENCH_RESULTS  where <name>.json goes (default tools/bench/results)
#   BENCH_SCALE    pgbench scale (default per script)
#   PB_KEEP=1      keep the work directory
#   BENCH_PG       PostgreSQL major to measure (default 15: the host's; others from
#                  tools/pgnative.sh's build/pg-native/<major>, else tools/pgversions.sh's)
#   BENCH_PGBIN    PostgreSQL bin directory (overrides BENCH_PG)
#   BENCH_PGBACKREST  pgBackRest binary (default the newest build/pgbackrest-<version>
#                  of tools/pgnative.sh, else /usr/bin/pgbackrest)
#   BENCH_IO_METHOD   io_method of the clusters bench_cluster makes (18 and later:
#                  worker, io_uring or sync; default the server's)

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_SRC=$(cd "$BENCH_DIR/../.." && pwd)
PB_BIN=${PB_BIN:-$BENCH_SRC/build/pageback}
case $PB_BIN in /*) ;; *) PB_BIN=$PWD/$PB_BIN ;; esac
export PB_BIN

# bench_pick_pgbin: the bin directory of BENCH_PGBIN or BENCH_PG (empty: PB_PGBIN or 15's).
bench_pick_pgbin() {
    local m=${BENCH_PG:-}
    if [ -n "${BENCH_PGBIN:-}" ]; then echo "$BENCH_PGBIN"
    elif [ -z "$m" ]; then echo "${PB_PGBIN:-/usr/lib/postgresql/15/bin}"
    elif [ -x "$BENCH_SRC/build/pg-native/$m/bin/postgres" ]; then echo "$BENCH_SRC/build/pg-native/$m/bin"
    elif [ -x "$BENCH_SRC/build/pg-versions/$m/bin/postgres" ]; then echo "$BENCH_SRC/build/pg-versions/$m/bin"
    else echo "/usr/lib/postgresql/$m/bin"
    fi
}

# bench_pick_pgbackrest: BENCH_PGBACKREST, else the newest native build, else the host's.
bench_pick_pgbackrest() {
    local b
    [ -n "${BENCH_PGBACKREST:-}" ] && { echo "$BENCH_PGBACKREST"; return; }
    b=$(ls -d "$BENCH_SRC"/build/pgbackrest-*/bin/pgbackrest 2>/dev/null | sort -V | tail -n 1)
    echo "${b:-/usr/bin/pgbackrest}"
}

PB_PGBIN=$(bench_pick_pgbin)
BENCH_PGBACKREST=$(bench_pick_pgbackrest)
export PB_PGBIN BENCH_PGBACKREST
# Scripts that call `pgbackrest` by name (and the servers' archive_command, which
# inherits this environment through runuser) find the chosen one first.
PATH=$(dirname "$BENCH_PGBACKREST"):$PATH
export PATH
# shellcheck disable=SC1091
source "$BENCH_SRC/tests/integration/pb_lib.sh"

BENCH_PY=(/usr/bin/python3 "$BENCH_DIR/bench.py")
BENCH_RESULTS=${BENCH_RESULTS:-$BENCH_DIR/results}
BENCH_REPS=${BENCH_REPS:-3}
BENCH_CACHES_DROPPED=true

bench_py() { "${BENCH_PY[@]}" "$@"; }

# bench_setup NAME: work directory, pageback repository, records file, machine facts.
bench_setup() {
    BENCH_NAME=$1
    [ "$(id -u)" = 0 ] || pb_die "benchmarks run as root (cache dropping, runuser)"
    for t in fio fincore "$BENCH_PGBACKREST" /usr/bin/time; do
        command -v "$t" >/dev/null || pb_die "$t is missing (tools/deps.sh installs it)"
    done
    [ -x "$PB_PGBIN/postgres" ] || pb_die "no PostgreSQL in $PB_PGBIN (BENCH_PG, BENCH_PGBIN)"
    pb_setup
    BENCH_REC=$PB_WORK/records.jsonl
    BENCH_TMP=$PB_WORK/tm
    mkdir -p "$BENCH_TMP" "$BENCH_RESULTS" && _pb_chown_pg "$BENCH_TMP"
    local commit dirty
    commit=$(git -C "$BENCH_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
    dirty=$(git -C "$BENCH_SRC" status --porcelain -uno 2>/dev/null | wc -l)
    bench_py rec "$BENCH_REC" kind=meta benchmark="$BENCH_NAME" \
        date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" host="$(hostname)" \
        cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
        vcpus="$(nproc)" mem_mib="$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)" \
        kernel="$(uname -r)" disk="$(bench_disk_of "$PB_WORK")" \
        fs="$(stat -f -c %T "$PB_WORK")" pg="$("$PB_PGBIN/postgres" --version)" \
        pgbackrest="$("$BENCH_PGBACKREST" version)" pgbackrest_bin="$BENCH_PGBACKREST" \
        pgbin="$PB_PGBIN" io_method="${BENCH_IO_METHOD:-default}" fio="$(fio --version)" \
        pageback_bin="$PB_BIN" pageback_commit="$commit" tracked_files_modified="$dirty" \
        pageback_bin_built="$(date -u -r "$PB_BIN" +%Y-%m-%dT%H:%M:%SZ)" \
        reps="$BENCH_REPS" loadavg_start="$(cut -d' ' -f1-3 /proc/loadavg)" \
        cmdline="$0" settings="$(env | grep "^BENCH_" | sort | tr "\n" " ")"
}

bench_disk_of() {
    local src
    src=$(df --output=source "$1" | tail -n 1)
    echo "${src##*/}"
}

# bench_rec key=value...: one measurement record.
bench_rec() { bench_py rec "$BENCH_REC" "$@"; }

# bench_report KIND: table on stdout, results JSON in BENCH_RESULTS/NAME.json.
bench_report() {
    bench_rec kind=meta_end loadavg_end="$(cut -d' ' -f1-3 /proc/loadavg)"
    bench_py report "$1" "$BENCH_REC" "$BENCH_RESULTS/$BENCH_NAME.json" || return 1
    echo
    echo "results: $BENCH_RESULTS/$BENCH_NAME.json"
}

# bench_drop_caches: write back, then drop the page cache (so every tool starts cold).
bench_drop_caches() {
    sync
    if ! echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
        [ "$BENCH_CACHES_DROPPED" = true ] && pb_log "WARNING: cannot drop caches; runs start warm"
        BENCH_CACHES_DROPPED=false
    fi
}

# bench_time CMD...: run CMD under /usr/bin/time as root; sets T_WALL T_CPU T_RSS_MIB T_RC.
bench_time() {
    local tf=$BENCH_TMP/time.$$
    T_RC=0
    /usr/bin/time -f '%e %U %S %M' -o "$tf" "$@" || T_RC=$?
    _bench_time_read "$tf"
}

# bench_time_pg CMD...: the same, CMD running as the postgres user.
bench_time_pg() {
    local tf=$BENCH_TMP/time.pg
    T_RC=0
    rm -f "$tf"
    _pb_as_pg /usr/bin/time -f '%e %U %S %M' -o "$tf" "$@" || T_RC=$?
    _bench_time_read "$tf"
}

_bench_time_read() {
    local line u s m
    line=$(tail -n 1 "$1")
    read -r T_WALL u s m <<<"$line"
    T_CPU=$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f", u + s}')
    T_RSS_MIB=$(awk -v m="$m" 'BEGIN {printf "%.1f", m / 1024}')
}

# bench_pb CMD ARGS...: a timed pageback command as postgres (output in $BENCH_TMP/pb.out).
bench_pb() {
    local cmd=$1 try
    shift
    for try in 1 2; do
        _bench_pb_once "$cmd" "$@"
        # Killed from outside (the machine is shared): run it once more.
        [ "$T_RC" = 137 ] || [ "$T_RC" = 143 ] || break
        pb_log "WARNING: pageback $cmd was killed by a signal (exit $T_RC); retrying once"
    done
    if [ "$T_RC" != 0 ]; then
        echo "pageback $cmd failed (exit $T_RC):" >&2
        tail -n 20 "$BENCH_TMP/pb.out" >&2
        return 1
    fi
}

_bench_pb_once() {
    local cmd=$1
    shift
    bench_time_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres \
        PGDATABASE=postgres "$PB_BIN" "$cmd" "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" "$@" \
        >"$BENCH_TMP/pb.out" 2>&1
}

# bench_pb_info ID FIELD...: fields of one backup from `pageback info --json`.
bench_pb_info() {
    local id=$1
    shift
    pb info --json >"$BENCH_TMP/info.json" && bench_py info-field "$BENCH_TMP/info.json" "$id" "$@"
}

# bench_cached DIR: "resident_bytes size_bytes" of the relation files (base/, global/).
bench_cached() {
    find "$1/base" "$1/global" -type f -print0 |
        xargs -0 fincore -b -n -o RES,SIZE 2>/dev/null |
        awk '{r += $1; s += $2} END {printf "%d %d\n", r, s}'
}

# bench_relfiles DIR: relation files of DIR at least MIN bytes long, one per line.
bench_relfiles() {
    find "$1/base" "$1/global" -type f -size +"${2:-0}"c -regex '.*/[0-9]+\(_[a-z]+\)?\(\.[0-9]+\)?$'
}

# bench_fio DIR READ_SIZE_KIB QD: O_DIRECT io_uring read of the relation files of DIR
# that hold at least one request (fio reads whole requests only); sets RAW_BYTES,
# RAW_S (fio's own runtime) and RAW_MIBS.
bench_fio() {
    local files
    files=$(bench_relfiles "$1" $(($2 * 1024 - 1)) | paste -sd:)
    T_RC=0
    bench_time fio --name=raw --filename="$files" --rw=read --bs="$2"k --iodepth="$3" \
        --direct=1 --ioengine=io_uring --file_service_type=sequential --readonly \
        --output-format=json --output="$BENCH_TMP/fio.json"
    [ "$T_RC" = 0 ] || { echo "fio failed" >&2; return 1; }
    read -r RAW_BYTES RAW_S _ <<<"$(bench_py fio-json "$BENCH_TMP/fio.json")"
    RAW_MIBS=$(awk -v b="$RAW_BYTES" -v s="$RAW_S" 'BEGIN {printf "%.1f", b / 1048576 / s}')
}

# bench_tune PGDATA: the read size (KiB) and queue depth pageback chooses here, in
# BENCH_READ_KIB and BENCH_QD.
bench_tune() {
    local out
    out=$(pb tune --pgdata "$1" 2>&1) || { echo "$out" >&2; return 1; }
    BENCH_READ_KIB=$(sed -n 's/^read size *\([0-9]*\) KiB.*/\1/p' <<<"$out")
    BENCH_QD=$(sed -n 's/^queue depth *\([0-9]*\).*/\1/p' <<<"$out")
    BENCH_READ_KIB=${BENCH_READ_KIB:-1024}
    BENCH_QD=${BENCH_QD:-8}
}

# ------------------------------------------------------------------ pgBackRest

# bench_pgbr_prepare: paths of a pgBackRest setup of its own under PB_WORK, and an
# archive_command that pushes every WAL segment to both repositories (so both tools
# pay for archiving and both can check their WAL). Call after pb_setup, before
# pg_init_cluster. BENCH_ARCHIVE_DURING_INIT=0 (default) archives nothing while
# pgbench -i loads (no backup needs that WAL); bench_archive_on turns archiving on.
bench_pgbr_prepare() {
    PGBR_DIR=$PB_WORK/pgbr
    PGBR_CONF=$PGBR_DIR/pgbackrest.conf
    mkdir -p "$PGBR_DIR"/{repo,log,lock,spool} && _pb_chown_pg "$PGBR_DIR"
    # Each tool's own push, and both chained (what bench_cluster sets up).
    BENCH_PB_PUSH=$PB_ARCHIVE_COMMAND
    BENCH_PGBR_PUSH="$BENCH_PGBACKREST --config=$PGBR_CONF --stanza=bench archive-push %p"
    BENCH_ARCHIVE_COMMAND="$BENCH_PB_PUSH && $BENCH_PGBR_PUSH"
    if [ "${BENCH_ARCHIVE_DURING_INIT:-0}" = 1 ]; then
        PB_ARCHIVE_COMMAND=$BENCH_ARCHIVE_COMMAND
    else
        PB_ARCHIVE_COMMAND=true
    fi
    export PB_ARCHIVE_COMMAND
}

# bench_pgbr_config PGDATA: write the stanza config (the cluster's port is known now).
bench_pgbr_config() {
    cat >"$PGBR_CONF" <<EOF
[global]
repo1-path=$PGBR_DIR/repo
repo1-retention-full=9999
log-path=$PGBR_DIR/log
lock-path=$PGBR_DIR/lock
spool-path=$PGBR_DIR/spool
log-level-console=warn
log-level-file=off
compress-type=zst
process-max=2
start-fast=y

[bench]
pg1-path=$1
pg1-port=$(pg_port "$1")
pg1-socket-path=$(pg_sockdir "$1")
pg1-user=postgres
EOF
    _pb_chown_pg "$PGBR_CONF"
}

pgbr() { _pb_as_pg "$BENCH_PGBACKREST" --config="$PGBR_CONF" --stanza=bench "$@"; }

# bench_archive_on PGDATA: switch archive_command to both repositories, create the
# pgBackRest stanza, and start a fresh WAL segment.
bench_archive_on() {
    local cmd=${BENCH_ARCHIVE_COMMAND//\'/\'\'}
    pg_conf "$1" "archive_command = '$cmd'" && pg_psql "$1" "SELECT pg_reload_conf()" >/dev/null &&
        sleep 1 && pg_psql "$1" "SELECT pg_switch_wal()" >/dev/null || return 1
    pgbr stanza-create >"$BENCH_TMP/pgbr.out" 2>&1 || { cat "$BENCH_TMP/pgbr.out" >&2; return 1; }
}

# bench_pgbr_backup TYPE: timed pgBackRest backup; sets T_* and PGBR_LABEL.
bench_pgbr_backup() {
    bench_time_pg "$BENCH_PGBACKREST" --config="$PGBR_CONF" --stanza=bench backup \
        --type="$1" "${@:2}" >"$BENCH_TMP/pgbr.out" 2>&1
    if [ "$T_RC" != 0 ]; then
        echo "pgbackrest backup --type=$1 failed:" >&2
        cat "$BENCH_TMP/pgbr.out" >&2
        return 1
    fi
    pgbr info --output=json >"$BENCH_TMP/pgbr-info.json" || return 1
    PGBR_LABEL=$(/usr/bin/python3 -c "
import json, sys
print(json.load(open(sys.argv[1]))[0]['backup'][-1]['label'])" "$BENCH_TMP/pgbr-info.json")
}

# bench_pgbr_stored LABEL: bytes of pgBackRest's backup directory for LABEL.
bench_pgbr_stored() { du -sb "$PGBR_DIR/repo/backup/bench/$1" | cut -f1; }

# ------------------------------------------------------------------ cluster

# bench_cluster SCALE [extra postgresql.conf lines...]: source cluster with pgbench data,
# archiving to both tools' repositories. Sets SRC and the libpq environment.
bench_cluster() {
    local scale=$1
    shift
    SRC=$PB_WORK/src
    pg_init_cluster "$SRC" || pb_die "initdb failed"
    [ $# -gt 0 ] && pg_conf "$SRC" "$@"
    bench_io_method "$SRC"
    pg_start "$SRC" || pb_die "source cluster did not start"
    pg_env "$SRC"
    bench_pgbr_config "$SRC"
    pb_log "pgbench -i -s $scale"
    pgbench_init "$SRC" "$scale" || pb_die "pgbench init failed"
    pg_psql "$SRC" "CHECKPOINT" >/dev/null
    bench_archive_on "$SRC" || pb_die "archiving setup failed"
    pb_log "cluster ready: $(du -sh --exclude=pg_wal "$SRC" | cut -f1) in $SRC"
}

# bench_wait_archived PGDATA: wait until no WAL segment is waiting for archive_command.
bench_wait_archived() {
    local i
    for i in $(seq 1 600); do
        [ -z "$(ls "$1/pg_wal/archive_status/" 2>/dev/null | grep '\.ready$')" ] && return 0
        sleep 0.5
    done
    pb_log "WARNING: WAL archiving is behind"
}

# bench_io_method PGDATA: BENCH_IO_METHOD into PGDATA's configuration; a server before 18
# (no io_method) or a value it does not know stops the bench here, naming it.
bench_io_method() {
    local m=${BENCH_IO_METHOD:-} v
    [ -n "$m" ] || return 0
    case $m in worker | io_uring | sync) ;; *) pb_die "BENCH_IO_METHOD=$m: not worker, io_uring or sync" ;; esac
    v=$("$PB_PGBIN/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)[.a-z].*/\1/p')
    [ "${v:-0}" -ge 18 ] || pb_die "BENCH_IO_METHOD=$m needs PostgreSQL 18 or later ($PB_PGBIN is ${v:-unknown})"
    pg_conf "$1" "io_method = $m"
}
