# tests/integration/lib.sh — shared helpers for pageback's integration tests.
#
# Usage, at the top of a test script:
#
#     #!/bin/bash
#     source "$(dirname "$0")/lib.sh"
#     pb_tmpdir                      # sets PB_WORK, installs the cleanup trap
#     pg_init_cluster "$PB_WORK/pg"  # initdb -k + test configuration
#     pg_start "$PB_WORK/pg"
#     ...
#     pb_test_summary                # "N passed, N failed"; non-zero if any failed
#
# Sourcing this file turns on `set -u -o pipefail` in the caller. The functions
# return non-zero with a message on stderr when something fails; pb_die exits.
# Functions that record state (pb_tmpdir, pg_start, pgbench_run_bg, the pb_test_*
# counters) must run in the test's own shell, not inside $(...).
#
# Runs as root (PostgreSQL tools run through `runuser -u postgres`, and the
# directories they touch are chowned to postgres) or as an ordinary user (tools run
# directly). Environment knobs:
#   PB_PGBIN            PostgreSQL 15 binaries (default /usr/lib/postgresql/15/bin)
#   PB_ARCHIVE_COMMAND  archive_command of new clusters (default 'true')
#   PB_KEEP=1           keep the work directory (and leave clusters stopped) at exit
#   PB_PG_START_TIMEOUT seconds pg_ctl waits for startup/recovery (default 300)

set -u -o pipefail

PB_PGBIN=${PB_PGBIN:-/usr/lib/postgresql/15/bin}
PB_ARCHIVE_COMMAND=${PB_ARCHIVE_COMMAND:-true}
PB_PG_START_TIMEOUT=${PB_PG_START_TIMEOUT:-300}
PB_WORK=${PB_WORK:-}
PB_PGBENCH_PID=${PB_PGBENCH_PID:-}
PB_TEST_PASSED=0
PB_TEST_FAILED=0
_PB_CLUSTERS=()
_PB_BG_PIDS=()

# ------------------------------------------------------------------ basics

pb_log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
pb_die() {
    echo "FATAL: $*" >&2
    exit 1
}

# Run a PostgreSQL tool as the postgres user when we are root.
_pb_as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Give a path to the postgres user (no-op unless root).
_pb_chown_pg() {
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres:postgres "$@"
    fi
}

_pb_in_main_shell() {
    [ "$BASHPID" = "$$" ] || pb_die "$1 must run in the test's shell, not in \$(...) or a pipe"
}

# Make the work directory: PB_WORK=/tmp/pbit.XXXXXX (0755 so postgres can traverse
# it). At exit: stop background pgbench runs and every cluster started here, then
# remove the directory unless PB_KEEP=1.
pb_tmpdir() {
    _pb_in_main_shell pb_tmpdir
    [ -z "$PB_WORK" ] || pb_die "pb_tmpdir: PB_WORK is already set ($PB_WORK)"
    PB_WORK=$(mktemp -d /tmp/pbit.XXXXXX) || pb_die "pb_tmpdir: mktemp failed"
    chmod 0755 "$PB_WORK"
    mkdir -m 0755 "$PB_WORK/sock"
    _pb_chown_pg "$PB_WORK/sock"
    export PB_WORK
    trap _pb_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

_pb_cleanup() {
    local rc=$? pid d pidfile
    trap - EXIT
    for pid in "${_PB_BG_PIDS[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    # Clusters started by this shell, and any other running cluster under PB_WORK
    # (started from a subshell).
    for d in "${_PB_CLUSTERS[@]}"; do
        [ -f "$d/postmaster.pid" ] && _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$d" -m immediate -w \
            stop >/dev/null 2>&1
    done
    if [ -n "$PB_WORK" ] && [ -d "$PB_WORK" ]; then
        while IFS= read -r pidfile; do
            _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$(dirname "$pidfile")" -m immediate -w stop \
                >/dev/null 2>&1
        done < <(find "$PB_WORK" -maxdepth 4 -name postmaster.pid 2>/dev/null)
        if [ "${PB_KEEP:-0}" = 1 ]; then
            echo "PB_KEEP=1: work directory kept: $PB_WORK" >&2
        else
            rm -rf "$PB_WORK"
        fi
    fi
    exit "$rc"
}

# ------------------------------------------------------------------ clusters

_pb_need_work() { [ -n "$PB_WORK" ] || pb_die "call pb_tmpdir first"; }

# A TCP port nobody listens on and that no cluster of this run was given. The
# clusters listen on a Unix socket only, but a free TCP port keeps a later
# listen_addresses change safe.
_pb_free_port() {
    local p i
    for i in $(seq 1 500); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        grep -qx "$p" "$PB_WORK/.ports" 2>/dev/null && continue
        [ -e "$PB_WORK/sock/.s.PGSQL.$p" ] && continue
        if command -v ss >/dev/null && ss -Hltn "sport = :$p" | grep -q .; then
            continue
        fi
        echo "$p" >>"$PB_WORK/.ports"
        echo "$p"
        return 0
    done
    echo "no free port found" >&2
    return 1
}

# Last value of a setting appended to DIR/postgresql.conf ("port", ...).
_pb_conf_get() {
    sed -n "s/^$2 = '\{0,1\}\([^']*\)'\{0,1\}\$/\1/p" "$1/postgresql.conf" | tail -n 1
}

pg_port() {
    local p
    p=$(_pb_conf_get "$1" port)
    [ -n "$p" ] || { echo "pg_port: no port set in $1/postgresql.conf" >&2; return 1; }
    echo "$p"
}

pg_sockdir() {
    local s
    s=$(_pb_conf_get "$1" unix_socket_directories)
    [ -n "$s" ] || { echo "pg_sockdir: no socket directory in $1/postgresql.conf" >&2; return 1; }
    echo "$s"
}

pg_logfile() { echo "${1%/}.log"; }

# Append settings to DIR/postgresql.conf (later lines win): pg_conf DIR "key = value"...
pg_conf() {
    local d=$1 line
    shift
    [ -f "$d/postgresql.conf" ] || { echo "pg_conf: $d/postgresql.conf missing" >&2; return 1; }
    for line in "$@"; do
        echo "$line" >>"$d/postgresql.conf"
    done
}

# Give a cluster (e.g. a freshly restored one) its own port and the run's socket
# directory, and make it owned by postgres with mode 0700 as the server demands.
pg_reconfigure() {
    local d=${1%/} port
    _pb_need_work
    port=$(_pb_free_port) || return 1
    pg_conf "$d" "# pageback test: port and socket of this copy" "port = $port" \
        "unix_socket_directories = '$PB_WORK/sock'" "listen_addresses = ''" || return 1
    _pb_chown_pg "$d"
    chmod 0700 "$d"
    rm -f "$d/postmaster.pid"
}

# pg_init_cluster DIR [--no-checksums]: initdb (checksums on by default) and the
# test configuration. The server log goes to DIR.log (beside PGDATA, so that the
# data directory holds only what PostgreSQL itself writes there).
pg_init_cluster() {
    local d=${1%/} checksums=-k out port cmd
    _pb_need_work
    [ "${2:-}" = "--no-checksums" ] && checksums=
    [ -e "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ] && {
        echo "pg_init_cluster: $d exists and is not empty" >&2
        return 1
    }
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d" || return 1
    out=$(_pb_as_pg "$PB_PGBIN/initdb" -D "$d" -A trust -U postgres --no-sync $checksums 2>&1) ||
        { echo "pg_init_cluster: initdb -D $d failed:" >&2; echo "$out" >&2; return 1; }
    port=$(_pb_free_port) || return 1
    cmd=${PB_ARCHIVE_COMMAND//\'/\'\'}
    pg_conf "$d" "" "# pageback test settings" \
        "port = $port" \
        "unix_socket_directories = '$PB_WORK/sock'" \
        "listen_addresses = ''" \
        "wal_level = replica" \
        "archive_mode = on" \
        "archive_command = '$cmd'" \
        "max_wal_size = 1GB" \
        "min_wal_size = 80MB" \
        "fsync = off" \
        "full_page_writes = on" \
        "shared_buffers = 128MB" \
        "max_connections = 50" \
        "log_checkpoints = on" \
        "log_line_prefix = '%m [%p] '" \
        "# pageback backs up with a spread checkpoint by default; a test cluster spreads" \
        "# it over no time (not 0.9 x checkpoint_timeout), so each backup starts at once" \
        "checkpoint_completion_target = 0" || return 1
    touch "$(pg_logfile "$d")" && _pb_chown_pg "$(pg_logfile "$d")"
}

# Remember a started cluster for the cleanup trap (once).
_pb_register() {
    local x
    for x in "${_PB_CLUSTERS[@]}"; do [ "$x" = "$1" ] && return 0; done
    _PB_CLUSTERS+=("$1")
}

pg_start() {
    local d=${1%/} log
    log=$(pg_logfile "$d")
    [ -f "$log" ] || { touch "$log" && _pb_chown_pg "$log"; }
    _pb_register "$d"
    if ! _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$d" -l "$log" -w -t "$PB_PG_START_TIMEOUT" start \
        >/dev/null 2>&1; then
        echo "pg_start: cluster $d did not start; last lines of $log:" >&2
        tail -n 20 "$log" >&2
        return 1
    fi
}

pg_stop() {
    local d=${1%/}
    if ! _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$d" -m fast -w -t 120 stop >/dev/null 2>&1; then
        echo "pg_stop: cluster $d did not stop; last lines of $(pg_logfile "$d"):" >&2
        tail -n 20 "$(pg_logfile "$d")" >&2
        return 1
    fi
}

pg_is_running() { _pb_as_pg "$PB_PGBIN/pg_ctl" -D "${1%/}" status >/dev/null 2>&1; }

# pg_psql DIR SQL [DB]: one command, unaligned tuples-only output, stops on error.
pg_psql() {
    local d=${1%/} port sock
    port=$(pg_port "$d") && sock=$(pg_sockdir "$d") || return 1
    "$PB_PGBIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres \
        -d "${3:-postgres}" -c "$2"
}

# pg_env DIR: export the libpq variables (and PGDATA) for this cluster.
pg_env() {
    local d=${1%/}
    PGHOST=$(pg_sockdir "$d") && PGPORT=$(pg_port "$d") || return 1
    export PGHOST PGPORT PGUSER=postgres PGDATABASE=postgres PGDATA=$d
}

# ------------------------------------------------------------------ content checks

# pg_digest DIR [DB]: "schema.table digest" for every ordinary table and materialized
# view outside the system schemas, sorted. The digest is order-independent: two
# 64-bit sums over the md5 of every row's text form (plus the row count), hashed
# once more, so large tables need no sort and no big string in memory.
pg_digest() {
    local d=${1%/} db=${2:-postgres} port sock
    port=$(pg_port "$d") && sock=$(pg_sockdir "$d") || return 1
    "$PB_PGBIN/psql" -X -At -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d "$db" <<'EOF'
SELECT format($q$SELECT %L || ' ' || md5(count(*) || ':' ||
        coalesce(sum(('x' || substr(h, 1, 16))::bit(64)::bigint::numeric), 0) || ':' ||
        coalesce(sum(('x' || substr(h, 17, 16))::bit(64)::bigint::numeric), 0))
    FROM (SELECT md5(t::text) AS h FROM %I.%I t) s$q$,
    n.nspname || '.' || c.relname, n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg_temp_%' AND n.nspname NOT LIKE 'pg_toast_temp_%'
ORDER BY n.nspname COLLATE "C", c.relname COLLATE "C"
\gexec
EOF
}

# pg_digest_all DIR: pg_digest of every connectable non-template database, each line
# prefixed with "db/".
pg_digest_all() {
    local d=${1%/} db dbs
    dbs=$(pg_psql "$d" "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate
                        ORDER BY datname COLLATE \"C\"") || return 1
    for db in $dbs; do
        pg_digest "$d" "$db" | sed "s|^|$db/|" || return 1
    done
}

# pg_amcheck_all DIR: heap and btree checks (with heapallindexed) in every database.
# Installs the amcheck extension where it is missing. A PB_PGBIN without pg_amcheck, or
# a server without the amcheck extension, skips the check with a note (pg_skip_note).
pg_amcheck_all() {
    local d=${1%/} port sock out
    port=$(pg_port "$d") && sock=$(pg_sockdir "$d") || return 1
    [ -x "$PB_PGBIN/pg_amcheck" ] || { pg_skip_note "pg_amcheck of $d" "no pg_amcheck"; return 0; }
    [ "$(pg_psql "$d" "SELECT count(*) FROM pg_available_extensions WHERE name = 'amcheck'")" = 1 ] ||
        { pg_skip_note "pg_amcheck of $d" "no amcheck extension"; return 0; }
    out=$("$PB_PGBIN/pg_amcheck" --all --install-missing --heapallindexed -h "$sock" \
        -p "$port" -U postgres 2>&1) ||
        { echo "pg_amcheck_all: corruption or failure in $d:" >&2; echo "$out" >&2; return 1; }
}

# pg_checksums_check DIR: verify every page checksum offline (cluster stopped). A PB_PGBIN
# without pg_checksums (some packaged servers) skips it with a note.
pg_checksums_check() {
    local d=${1%/} out
    [ -x "$PB_PGBIN/pg_checksums" ] ||
        { pg_skip_note "pg_checksums of $d" "no pg_checksums"; return 0; }
    if pg_is_running "$d"; then
        echo "pg_checksums_check: $d is running; stop it first" >&2
        return 1
    fi
    out=$(_pb_as_pg "$PB_PGBIN/pg_checksums" --check -D "$d" 2>&1) ||
        { echo "pg_checksums_check: $d failed:" >&2; echo "$out" >&2; return 1; }
}

# pg_skip_note WHAT WHY: say that a check was skipped for what PB_PGBIN lacks, so that a
# run against other binaries shows what it did not check (PB_SKIPPED counts them).
PB_SKIPPED=0
pg_skip_note() {
    PB_SKIPPED=$((PB_SKIPPED + 1))
    echo "note: $1 skipped: $2 in $PB_PGBIN"
}

# ------------------------------------------------------------------ load

pgbench_init() {
    local d=${1%/} port sock out
    port=$(pg_port "$d") && sock=$(pg_sockdir "$d") || return 1
    out=$("$PB_PGBIN/pgbench" -i -q -s "${2:-1}" -h "$sock" -p "$port" -U postgres postgres 2>&1) ||
        { echo "pgbench_init: pgbench -i -s ${2:-1} failed:" >&2; echo "$out" >&2; return 1; }
}

# pgbench_run_bg DIR SECONDS [CLIENTS]: TPC-B-like load in the background; the pid is
# in PB_PGBENCH_PID and its output in $PB_WORK/pgbench.<pid>.log.
pgbench_run_bg() {
    local d=${1%/} secs=$2 clients=${3:-2} port sock
    _pb_in_main_shell pgbench_run_bg
    _pb_need_work
    port=$(pg_port "$d") && sock=$(pg_sockdir "$d") || return 1
    # The child names its own log after its pid, so the name is known before it writes.
    bash -c 'exec "$1" -n -T "$2" -c "$3" -j "$4" -h "$5" -p "$6" -U postgres postgres \
        >"$7.$$.log" 2>&1' pgbench "$PB_PGBIN/pgbench" "$secs" "$clients" \
        $((clients < 2 ? clients : 2)) "$sock" "$port" "$PB_WORK/pgbench" &
    PB_PGBENCH_PID=$!
    _PB_BG_PIDS+=("$PB_PGBENCH_PID")
}

# pgbench_run_until_bg DIR STOPFILE SECONDS [CLIENTS [PGBENCH_ARGS...]]: load in the
# background for SECONDS or until STOPFILE exists, whichever comes first (one-second runs
# back to back), so that a load around a command of unknown length ends soon after it.
# The first run that fails ends it; pid, log and pgbench_wait as for pgbench_run_bg.
pgbench_run_until_bg() {
    local d=${1%/} stop=$2 secs=$3 clients=${4:-2} port sock
    shift $(($# < 4 ? $# : 4))
    _pb_in_main_shell pgbench_run_until_bg
    _pb_need_work
    port=$(pg_port "$d") && sock=$(pg_sockdir "$d") || return 1
    bash -c 'log=$7.$$.log; end=$((SECONDS + $9)); : >"$log"
        while [ ! -e "$8" ] && [ "$SECONDS" -lt "$end" ]; do
            "$1" -n -T "$2" -c "$3" -j "$4" -h "$5" -p "$6" -U postgres "${@:10}" postgres \
                >>"$log" 2>&1 || exit
        done' pgbench "$PB_PGBIN/pgbench" 1 "$clients" $((clients < 2 ? clients : 2)) "$sock" \
        "$port" "$PB_WORK/pgbench" "$stop" "$secs" "$@" &
    PB_PGBENCH_PID=$!
    _PB_BG_PIDS+=("$PB_PGBENCH_PID")
}

# pgbench_wait [PID]: wait for a background run (default the last one); fails, showing
# its output, if pgbench failed.
pgbench_wait() {
    local pid=${1:-$PB_PGBENCH_PID} rc=0
    [ -n "$pid" ] || { echo "pgbench_wait: no pgbench running" >&2; return 1; }
    wait "$pid" || rc=$?
    if [ "$rc" != 0 ]; then
        echo "pgbench_wait: pgbench (pid $pid) exited with $rc:" >&2
        tail -n 20 "$PB_WORK/pgbench.$pid.log" >&2
        return 1
    fi
}

# ------------------------------------------------------------------ results

pb_test_ok() {
    PB_TEST_PASSED=$((PB_TEST_PASSED + 1))
    echo "ok   $*"
}

pb_test_fail() {
    PB_TEST_FAILED=$((PB_TEST_FAILED + 1))
    echo "FAIL $*"
}

# pb_assert_eq ACTUAL EXPECTED MSG
pb_assert_eq() {
    if [ "$1" == "$2" ]; then
        pb_test_ok "$3"
    else
        pb_test_fail "$3: expected '$2', got '$1'"
        return 1
    fi
}

# pb_assert_ne A B MSG
pb_assert_ne() {
    if [ "$1" != "$2" ]; then
        pb_test_ok "$3"
    else
        pb_test_fail "$3: both are '$1'"
        return 1
    fi
}

# pb_check MSG CMD...: run a command, count it as passed if it succeeds.
pb_check() {
    local msg=$1
    shift
    if "$@"; then
        pb_test_ok "$msg"
    else
        pb_test_fail "$msg (command: $*)"
        return 1
    fi
}

pb_test_summary() {
    echo "$PB_TEST_PASSED passed, $PB_TEST_FAILED failed"
    [ "$PB_TEST_FAILED" = 0 ]
}
