#!/bin/bash
# A restore run as root gives every file and directory it writes to the owner of the
# target directory (the tablespace directories included), whatever the mode: into an
# empty directory, --delta into an existing copy, and --force. The copy then starts as
# that user. (The ownership pass once listed the target through a descriptor whose
# offset the delta prune or the --force emptying had already read to the end, and
# left everything to root.)
source "$(dirname "$0")/pb_lib.sh"
[ "$(id -u)" = 0 ] || { echo "restore_owner.sh needs root: skipped"; echo "0 passed, 0 failed"; exit 0; }
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_conf "$SRC" "autovacuum = off" && pg_start "$SRC" ||
    pb_die "source cluster did not start"
pg_env "$SRC"
TS=$PB_WORK/ts1
mkdir -p "$TS" && _pb_chown_pg "$TS"
pg_psql "$SRC" "CREATE TABLESPACE ts1 LOCATION '$TS'" >/dev/null
pg_psql "$SRC" "CREATE TABLE in_ts TABLESPACE ts1 AS SELECT g, md5(g::text) v
                FROM generate_series(1, 5000) g" >/dev/null
pg_psql "$SRC" "CREATE TABLE plain AS SELECT g FROM generate_series(1, 5000) g" >/dev/null
pb_check "full backup" pb_backup_logged --type full --checkpoint fast
TSOID=$(pg_psql "$SRC" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")
WANT=$(pg_psql "$SRC" "SELECT count(*), sum(g) FROM in_ts")
pb_check "WAL archived" pb_archive_all "$SRC"

T=$PB_WORK/copy RTS=$PB_WORK/copy-ts RSTATE=$PB_WORK/root-state
mkdir -p "$T" "$RTS" && chmod 0700 "$T" && _pb_chown_pg "$T" "$RTS"
mkdir -m 0700 "$RSTATE"
# root_restore ARGS...: pageback restore run as root (its own state directory).
root_restore() {
    "$PB_BIN" restore "${PB_REPO_ARGS[@]}" --state-dir "$RSTATE" --target-dir "$T" \
        --tablespace-map "$TSOID=$RTS" "$@" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
}
# owners_ok LABEL: nothing under the copy or its tablespace belongs to anyone else.
owners_ok() {
    local bad
    bad=$(find "$T" "$RTS" -not -user postgres 2>&1 | head -n 5)
    [ -z "$bad" ] && pb_test_ok "$1: everything belongs to postgres" ||
        pb_test_fail "$1: not postgres': $bad"
}
# start_copy LABEL: give the copy a port (appended as root: the file keeps its owner),
# start it as postgres, and read the tablespace's table.
start_copy() {
    local port
    port=$(_pb_free_port) || return 1
    rm -f "$T/postmaster.pid"
    pg_conf "$T" "port = $port" "unix_socket_directories = '$PB_WORK/sock'" \
        "listen_addresses = ''" "archive_mode = off"
    if pg_start "$T" && pb_wait_recovery "$T"; then
        pb_assert_eq "$(pg_psql "$T" "SELECT count(*), sum(g) FROM in_ts")" "$WANT" \
            "$1: the copy starts and reads the tablespace's table"
        pg_psql "$T" "CREATE TABLE extra AS SELECT g FROM generate_series(1, 1000) g" >/dev/null
        pg_stop "$T"
    else
        pb_test_fail "$1: the copy does not start"
    fi
}

pb_check "restore as root into an empty directory" root_restore
owners_ok "empty target"
start_copy "empty target"
pb_check "restore --delta as root into the copy" root_restore --delta
owners_ok "--delta"
start_copy "--delta"
# --force empties the target; a non-empty tablespace directory is refused (it may be
# another cluster's), so the DBA empties it.
find "$RTS" -mindepth 1 -delete
pb_check "restore --force as root over the copy" root_restore --force
owners_ok "--force"
start_copy "--force"
pg_stop "$SRC"
pb_test_summary
