# tests/integration/pb_lib.sh — pageback-specific helpers on top of lib.sh.
#
#   PB_BIN        the pageback binary (default: build/pageback of this checkout)
#   PB_REPO_KIND  posix (default) or s3: where pb_repo_setup puts the repository
#
# Every pageback command runs as the postgres user, as a DBA would run it: the WAL
# archive (archive_command) and backups then share one owner of the repository.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PB_SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PB_BIN=${PB_BIN:-$PB_SRCDIR/build/pageback}
PB_REPO_KIND=${PB_REPO_KIND:-posix}
[ -x "$PB_BIN" ] || pb_die "pageback binary $PB_BIN not found: build first"

# pb_repo_setup: sets PB_REPO (and the S3 settings in PB_REPO_ARGS), PB_STATE and
# PB_ARCHIVE_COMMAND. Call after pb_tmpdir and before pg_init_cluster.
pb_repo_setup() {
    PB_STATE=$PB_WORK/state
    mkdir -p "$PB_STATE" && _pb_chown_pg "$PB_STATE"
    PB_REPO_ARGS=()
    if [ "$PB_REPO_KIND" = s3 ]; then
        _pb_s3_setup || pb_die "S3 test server did not start"
    else
        PB_REPO=$PB_WORK/repo
        mkdir -p "$PB_REPO" && _pb_chown_pg "$PB_REPO"
        PB_REPO_ARGS=(--repo "$PB_REPO")
    fi
    PB_ARCHIVE_COMMAND="$PB_BIN archive-push %p ${PB_REPO_ARGS[*]}"
    export PB_ARCHIVE_COMMAND
}

_pb_s3_setup() {
    local bucket=pb$RANDOM
    PB_S3_DIR=$PB_WORK/s3
    mkdir -p "$PB_S3_DIR"
    "$PB_SRCDIR/tests/s3server/start.sh" "$PB_S3_DIR" >"$PB_WORK/s3-start.log" 2>&1 ||
        { cat "$PB_WORK/s3-start.log" >&2; return 1; }
    _PB_S3_STARTED=1
    # shellcheck disable=SC1091
    source "$PB_S3_DIR/env"
    "$PB_SRCDIR/tests/s3server/mkbucket.sh" "$PB_S3_DIR" "$bucket" >/dev/null || return 1
    # Credentials reach the postgres user's archive_command through a 0600 config file.
    PB_S3_CONFIG=$PB_WORK/pageback.conf
    printf 's3-key = %s\ns3-secret = %s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" \
        >"$PB_S3_CONFIG"
    chmod 600 "$PB_S3_CONFIG" && _pb_chown_pg "$PB_S3_CONFIG"
    PB_REPO=s3://$bucket/repo
    PB_REPO_ARGS=(--repo "$PB_REPO" --s3-endpoint "$S3_ENDPOINT" --s3-region us-east-1
                  --config "$PB_S3_CONFIG")
}

_pb_s3_cleanup() {
    [ "${_PB_S3_STARTED:-0}" = 1 ] && "$PB_SRCDIR/tests/s3server/stop.sh" "$PB_S3_DIR" \
        >/dev/null 2>&1
    _PB_S3_STARTED=0
}

# pb CMD ARGS...: run pageback as postgres against the test repository and cluster.
# A restore without a target replays the archived WAL to its end; the scripts written
# before that default compare a copy with the state at its backup, so pb restore asks for
# --target-immediate through the environment (a target on the command line wins), unless
# the script sets PB_TARGET_IMMEDIATE=false (restore_kinds.sh).
pb() {
    local cmd=$1 pin=()
    shift
    [ "$cmd" = restore ] && pin=(PAGEBACK_TARGET_IMMEDIATE="${PB_TARGET_IMMEDIATE:-true}")
    _pb_as_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres "${pin[@]}" \
        PGDATABASE=postgres "$PB_BIN" "$cmd" "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" "$@"
}

# pb_info_field ID FIELD: one numeric/string field of a backup from `info --json`.
pb_info_field() {
    pb info --json | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
for b in d['backups']:
    if b['id'] == sys.argv[1]:
        print(b[sys.argv[2]])
" "$1" "$2"
}

# pb_info_fields ID FIELD...: those fields of a backup from one `info --json`, space
# separated in the order given.
pb_info_fields() {
    pb info --json | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
for b in d['backups']:
    if b['id'] == sys.argv[1]:
        print(' '.join(str(b[f]) for f in sys.argv[2:]))
" "$@"
}

# pb_report_dir: $OUT, a directory the postgres user may write --report files into.
pb_report_dir() {
    OUT=$PB_WORK/out
    mkdir -p "$OUT" && _pb_chown_pg "$OUT"
}

# pb_json FILE EXPR: print the value EXPR (a Python subscript, e.g. '["peak_rss_bytes"]')
# of the JSON report FILE; nothing when it cannot be read.
pb_json() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))$2)" "$1" 2>/dev/null; }

# pb_check_rss REPORT BOUND_MIB WHAT: one check that WHAT's peak RSS (the JSON REPORT's
# peak_rss_bytes, in MiB) is at most BOUND_MIB; a report without it fails.
pb_check_rss() {
    local rss
    rss=$(pb_json "$1" '["peak_rss_bytes"] // 1048576')
    pb_log "$3: peak RSS ${rss:-?} MiB (bound $2 MiB)"
    if [ -n "$rss" ] && [ "$rss" -le "$2" ]; then
        pb_test_ok "peak RSS of $3 ($rss MiB) is within $2 MiB"
    else
        pb_test_fail "peak RSS of $3 is ${rss:-unknown} MiB, over $2 MiB"
    fi
}

# pb_backup_id OUTPUT: the id from a `pageback backup` summary line.
pb_last_id() {
    pb info --json | /usr/bin/python3 -c "
import json, sys
print(json.load(sys.stdin)['backups'][-1]['id'])"
}

# pb_restore_start DIR RESTORE_ARGS...: restore into DIR (owned by postgres), give it
# its own port with archiving off (a restored copy must not push into the source's
# archive), start it and wait for recovery to finish.
pb_restore_start() {
    local d=$1
    shift
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    pb restore --target-dir "$d" "$@" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
    pg_reconfigure "$d" && pg_conf "$d" "archive_mode = off" || return 1
    pg_start "$d" || return 1
    pb_wait_recovery "$d"
}

# pb_wait_recovery DIR: wait until the server has left recovery (promoted); polled every
# 0.1 s (a restore's recovery often ends within a second), for up to two minutes.
pb_wait_recovery() {
    local i
    for i in $(seq 1 1200); do
        [ "$(pg_psql "$1" 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && return 0
        sleep 0.1
    done
    echo "pb_wait_recovery: $1 still in recovery" >&2
    tail -n 20 "$(pg_logfile "$1")" >&2
    return 1
}

# pb_setup: work directory, repository and cleanup of everything at exit.
pb_setup() {
    pb_tmpdir
    trap '_pb_rc=$?; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT
    pb_repo_setup
}

# pb_pgbench_source SCALE: the source cluster most scripts start from, in $PB_WORK/src
# (SRC), autovacuum off (so nothing changes pages behind a test's back), pgbench data at
# SCALE, and the libpq environment pointing at it. Dies on failure.
pb_pgbench_source() {
    SRC=$PB_WORK/src
    pg_init_cluster "$SRC" && pg_conf "$SRC" "autovacuum = off" && pg_start "$SRC" ||
        pb_die "source cluster did not start"
    pg_env "$SRC"
    pgbench_init "$SRC" "$1" || pb_die "pgbench init failed"
}

# ------------------------------------------------ recovery-target helpers
# What the point-in-time scripts (pitr.sh, wal_targets.sh, timeline.sh) share: archive
# the WAL written so far, fingerprint a table's rows, restore to a target and compare,
# and check that a refused target writes nothing.

# pb_archive_all DIR: switch DIR's cluster to a new segment and wait until the one it
# closed is archived (segment numbers compared without the timeline: a history file
# archived meanwhile does not count as done). A WAL record is written before each switch,
# and the switch is repeated every 2 s while waiting: a switch that finds its segment just
# begun does nothing (seen on a promoted PostgreSQL 17 copy), and the segment it named is
# then closed by a later one. Up to two minutes: after three failed attempts in a row
# PostgreSQL's archiver waits a minute before it tries again.
pb_archive_all() {
    local seg="" s last i
    for i in $(seq 0 1199); do
        if [ $((i % 20)) = 0 ]; then
            pg_psql "$1" "SELECT pg_logical_emit_message(false, 'pageback-test', 'switch')" \
                >/dev/null && s=$(pg_psql "$1" "SELECT pg_walfile_name(pg_switch_wal())") ||
                return 1
            seg=${seg:-$s}
        fi
        last=$(pg_psql "$1" "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        [[ "${last:8:16}" < "${seg:8:16}" ]] || return 0
        sleep 0.1
    done
    echo "pb_archive_all: $seg of $1 was not archived; pg_stat_archiver: $(pg_psql "$1" \
        "SELECT archived_count, last_archived_wal, failed_count, last_failed_wal FROM pg_stat_archiver")" >&2
    tail -n 5 "$(pg_logfile "$1")" >&2
    return 1
}

# pb_ins_procedure DIR COLUMNS VALUES [PAUSE]: create procedure ins(n int, tg text) in DIR's
# cluster: n rows into table t, one transaction each (COLUMNS and VALUES as in INSERT; tg
# is the caller's tag), with a pause of PAUSE seconds after each commit.
pb_ins_procedure() {
    pg_psql "$1" "CREATE PROCEDURE ins(n int, tg text) LANGUAGE plpgsql AS \$\$
       BEGIN
         FOR i IN 1..n LOOP
           INSERT INTO t ($2) VALUES ($3);
           COMMIT;
           ${4:+PERFORM pg_sleep($4);}
         END LOOP;
       END \$\$" >/dev/null
}

# pb_rows DIR [MAX_ID] [ROW_TEXT]: "count max md5" of table t's rows (ids in commit order)
# in DIR's cluster, all or those with id <= MAX_ID; ROW_TEXT (default id::text) is what
# each row contributes to the md5.
pb_rows() {
    pg_psql "$1" "SELECT count(*) || ' ' || coalesce(max(id), 0) || ' ' ||
                  md5(coalesce(string_agg(${3:-id::text}, ',' ORDER BY id), '')) FROM t
                  ${2:+WHERE id <= $2}"
}

# pb_next_second [SECOND]: wait until the clock is in a later whole second than SECOND
# (seconds since the epoch; default now). Backup stop times are whole seconds: what is
# written after this is clearly later than a backup that ended by SECOND.
pb_next_second() {
    local past=${1:-${EPOCHREALTIME%[.,]*}}
    while [ "${EPOCHREALTIME%[.,]*}" -le "$past" ]; do sleep 0.05; done
}

# pb_past_skip_margin: wait until what was written so far has aged past the file-skip
# rule's margin: a file written in the second a backup starts in, or the second before,
# is read again by the next backup (engine/backup/backup_skip.c, bk_mtime_horizon).
pb_past_skip_margin() {
    pb_next_second "$(( ${EPOCHREALTIME%[.,]*} + 1 ))"
}

# pb_rm_bg DIR: remove DIR in the background (moved aside first, so DIR can be made
# again at once): a restored copy's removal overlaps the next step instead of waiting
# for its freshly written files to be freed.
pb_rm_bg() {
    local gone=$1.gone.$BASHPID.$RANDOM
    mv "$1" "$gone" 2>/dev/null || { rm -rf "$1"; return; }
    rm -rf "$gone" &
}

# pb_backup_logged ARGS...: pb backup ARGS, its output in $PB_WORK/backup.out (shown
# on failure).
pb_backup_logged() {
    pb backup "$@" >"$PB_WORK/backup.out" 2>&1 || { cat "$PB_WORK/backup.out" >&2; return 1; }
}

# pb_pitr LABEL EXPECTED_ROWS EXPECTED_SET RESTORE_ARGS...: restore into a new directory,
# start it and wait for recovery; check the backup the restore chose ("restored backup
# ID" in $PB_WORK/restore.out) and that pb_rows of the copy (ROW_TEXT from
# PB_PITR_ROW_TEXT) is EXPECTED_ROWS; stop the copy, run the caller's PB_PITR_AFTER
# LABEL DIR (a function name, if set) for its own checks, and remove the copy.
PB_PITR_N=0
pb_pitr() {
    local label=$1 want=$2 set=$3 d chosen
    shift 3
    PB_PITR_N=$((PB_PITR_N + 1))
    d=$PB_WORK/r$PB_PITR_N
    if ! pb_restore_start "$d" "$@"; then
        pb_test_fail "$label: restore or recovery failed"
        return 1
    fi
    chosen=$(sed -n 's/^restored backup \([^ ]*\) .*/\1/p' "$PB_WORK/restore.out")
    pb_assert_eq "$chosen" "$set" "$label: restored backup $set"
    pb_assert_eq "$(pb_rows "$d" "" "${PB_PITR_ROW_TEXT:-}")" "$want" \
        "$label: exactly the rows before the target"
    pg_stop "$d"
    [ -n "${PB_PITR_AFTER:-}" ] && "$PB_PITR_AFTER" "$label" "$d"
    pb_rm_bg "$d"
}

# pb_refused LABEL PATTERN RESTORE_ARGS...: the restore fails with a message matching
# the extended regex PATTERN and leaves its (empty) target directory empty.
pb_refused() {
    local label=$1 pat=$2 d=$PB_WORK/refused out
    shift 2
    mkdir -p "$d" && _pb_chown_pg "$d"
    if out=$(pb restore --target-dir "$d" "$@" 2>&1); then
        pb_test_fail "$label: restore succeeded"
    elif ! grep -qE -- "$pat" <<<"$out"; then
        pb_test_fail "$label: message does not match /$pat/: $out"
    elif [ -n "$(ls -A "$d")" ]; then
        pb_test_fail "$label: the target directory is not empty"
    else
        pb_test_ok "$label"
    fi
    rm -rf "$d"
}

# The scripts read what a backup logs about its I/O (classes, in flight, flushes...),
# which the console shows at --log-level detail (info, its default, leaves it to the log
# file); console_output.sh checks the default itself. A binary older than the detail
# level logs all of it at info (and refuses "detail": then it is not set).
"$PB_BIN" info --log-level detail --help >/dev/null 2>&1 &&
    export PAGEBACK_LOG_LEVEL=${PAGEBACK_LOG_LEVEL-detail}

# pb_source_cluster [CONF_LINE...]: the usual source of a test: SRC=$PB_WORK/src, initdb'd
# with CONF_LINE... added to its configuration, started, and PG* pointed at it. Runs in the
# test's own shell (pg_start records the cluster for cleanup).
pb_source_cluster() {
    _pb_in_main_shell pb_source_cluster
    SRC=$PB_WORK/src
    pg_init_cluster "$SRC" && { [ $# = 0 ] || pg_conf "$SRC" "$@"; } && pg_start "$SRC" ||
        pb_die "source cluster did not start"
    pg_env "$SRC"
}

# pb_while_writing DIR CMD...: run CMD (a backup from DIR's standby) while DIR's cluster
# writes a WAL record every 0.5 s; CMD's exit status. A standby's backup may end at a
# segment boundary (its last replayed record a segment switch): it then waits for the
# primary to finish the segment that begins there, and archive_timeout switches only after
# a record that counts as activity, which the standby snapshots an idle primary logs do
# not: without writes the segment waits for the next timed checkpoint (5 minutes).
pb_while_writing() {
    local dir=$1 pid
    shift
    "$@" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        pg_psql "$dir" "SELECT pg_logical_emit_message(false, 'pageback-test', 'activity')" \
            >/dev/null
        sleep 0.5
    done
    wait "$pid"
}

# pb_wait_pgbench DIR N: wait until N pgbench sessions are connected to DIR's cluster (a
# background load is under way), polled every 0.05 s for up to 2 s (then it goes on).
pb_wait_pgbench() {
    local i
    for i in $(seq 1 40); do
        [ "$(pg_psql "$1" "SELECT count(*) FROM pg_stat_activity
                           WHERE application_name = 'pgbench'")" -ge "$2" ] && return 0
        sleep 0.05
    done
}

# pb_source_pgbench SCALE [CONF_LINE...]: pb_source_cluster with pgbench data at SCALE
# (autovacuum left as configured, unlike pb_pgbench_source). Dies on failure.
pb_source_pgbench() {
    _pb_in_main_shell pb_source_pgbench
    local scale=$1
    shift
    pb_source_cluster "$@"
    pgbench_init "$SRC" "$scale" || pb_die "pgbench init failed"
}

# pb_ids: the ids of the backups `info` lists, in its order, on one line.
pb_ids() {
    pb info --json | /usr/bin/python3 -c "
import json, sys
print(' '.join(b['id'] for b in json.load(sys.stdin)['backups']))"
}

# pb_log_has FILE REGEX MSG: one check, that FILE has a line matching the extended REGEX.
pb_log_has() {
    if grep -Eq -- "$2" "$1"; then pb_test_ok "$3"; else
        pb_test_fail "$3 (no line matching '$2' in $1)"; fi
}

# pb_restore_digest MSG FAIL_MSG DIR DIGEST RESTORE_ARGS...: restore into DIR and start it
# (pb_restore_start); one check: its contents (pg_digest_all) are DIGEST (MSG), or the
# restore failed (FAIL_MSG). The copy is stopped.
pb_restore_digest() {
    local msg=$1 fail=$2 d=$3 want=$4
    shift 4
    if pb_restore_start "$d" "$@"; then
        pb_assert_eq "$(pg_digest_all "$d")" "$want" "$msg"
        pg_stop "$d"
    else
        pb_test_fail "$fail"
    fi
}

# pb_backup_to FILE ARGS...: pb backup ARGS, its output in FILE (shown on failure).
pb_backup_to() {
    local out=$1
    shift
    pb backup "$@" >"$out" 2>&1 || { cat "$out"; return 1; }
}

# pb_backup_id VAR ARGS...: pb backup ARGS (dies on failure, its output shown), the id
# from its summary line put in the caller's variable VAR.
pb_backup_id() {
    local _pb_var=$1 _pb_out
    shift
    _pb_out=$(pb backup "$@" 2>&1) || { echo "$_pb_out" >&2; pb_die "backup $_pb_var failed"; }
    printf -v "$_pb_var" %s "$(sed -n 's/^backup \([^ ]*\) (.*complete.*/\1/p' <<<"$_pb_out")"
}
