#!/bin/bash
# A tablespace created after the backup: replay of its CREATE TABLESPACE record links the
# restored cluster's pg_tblspc/<oid> to the location the WAL carries, whatever
# --tablespace-map says; on the source's host that is the running source's tablespace.
# A restore whose replay reaches that record is refused while the location exists here
# and is not empty (with and without --tablespace-map), naming the OID, the location,
# and the way out, nothing written and the source's tablespace untouched; a target before
# the record restores and starts; once the location does not exist on this host the
# restore goes ahead with a warning. Small cluster.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source 1
q() { pg_psql "$SRC" "$1"; }

pb_backup_logged --type full --checkpoint fast || pb_die "backup failed"
F=$(pb_last_id)
F_END=${EPOCHREALTIME%[.,]*}
q "CREATE TABLE before_ts AS SELECT g AS id FROM generate_series(1, 100) g" >/dev/null
BEFORE=$(q "SELECT pg_current_wal_lsn()")
TS=$PB_WORK/ts_new
mkdir -p "$TS" && _pb_chown_pg "$TS"
q "CREATE TABLESPACE ts_new LOCATION '$TS'" >/dev/null
q "CREATE TABLE in_ts TABLESPACE ts_new AS SELECT g AS id FROM generate_series(1, 1000) g" \
    >/dev/null
OID=$(q "SELECT oid FROM pg_tablespace WHERE spcname = 'ts_new'")
AFTER=$(q "SELECT pg_current_wal_lsn()")
pb_archive_all "$SRC" || pb_die "WAL not archived"
pb_next_second "$F_END"
NOW=$(PGTZ=UTC q "SELECT now()")
ts_sum() { (cd "$TS" && find . -printf '%p %y %s\n' | sort) | sha256sum; }
LIVE=$(ts_sum)
pb_log "backup $F; tablespace $OID created at $TS after $BEFORE; target time $NOW"

REFUSED="tablespace $OID is created during replay .* at $TS, which exists on this host and is \
not empty.*--target-lsn.*--tablespace-map.*nothing was written"
pb_refused "a time target past CREATE TABLESPACE is refused" "$REFUSED" --target-time "$NOW"
pb_refused "an LSN target past it is refused" "$REFUSED" --target-lsn "$AFTER"
pb_refused "--tablespace-map does not make it safe: still refused, saying why" \
    "tablespace $OID is created during replay.*--tablespace-map $OID=$PB_WORK/elsewhere does \
not change that.*nothing was written" --target-time "$NOW" \
    --tablespace-map "$OID=$PB_WORK/elsewhere"
pb_assert_eq "$(ts_sum)" "$LIVE" "the source's tablespace directory is untouched"
pb_check "nothing was created at the mapped location" test ! -e "$PB_WORK/elsewhere"

# A target before the record: replay never creates the tablespace.
if pb_restore_start "$PB_WORK/r1" --target-lsn "$BEFORE"; then
    pb_assert_eq "$(pg_psql "$PB_WORK/r1" "SELECT count(*) FROM before_ts")" 100 \
        "a target before CREATE TABLESPACE restores, with the rows before it"
    pb_assert_eq "$(ls "$PB_WORK/r1/pg_tblspc" | wc -l)" 0 "and no tablespace link"
    pg_stop "$PB_WORK/r1"
else
    pb_test_fail "restore to a target before CREATE TABLESPACE"
fi

# The location absent on this host (the source stopped, its tablespace moved away): the
# restore goes ahead and warns that recovery needs the directory.
pg_stop "$SRC"
mv "$TS" "$PB_WORK/ts_moved"
mkdir -p "$PB_WORK/r2" && _pb_chown_pg "$PB_WORK/r2"
if pb restore --target-dir "$PB_WORK/r2" --target-time "$NOW" >"$PB_WORK/r2.out" 2>&1; then
    pb_check "the location absent here: restored, warning that recovery needs it" grep -q \
        "tablespace $OID is created during replay .* at $TS, which does not exist on this host" \
        "$PB_WORK/r2.out"
else
    pb_test_fail "the location absent here: restore failed: $(cat "$PB_WORK/r2.out")"
fi
pb_test_summary
