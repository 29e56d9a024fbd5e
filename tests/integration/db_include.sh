#!/bin/bash
# restore --db-include NAME: two user databases, a full and an incremental backup; an
# unknown name is refused before anything is written; restoring one database restores
# the other's relation files as empty stubs, the cluster starts, the included database
# (and postgres) equal the source at the target, the left-out one can be dropped. Then
# delta restores into the same directory: without --db-include everything comes back,
# with it the other database becomes the stub.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$@" >/dev/null; }
for db in postgres db_one db_two; do
    [ $db = postgres ] || q "CREATE DATABASE $db"
    q "CREATE TABLE t (id int PRIMARY KEY, v text);
       INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 20000) g" "$db"
done
OID_ONE=$(pg_psql "$SRC" "SELECT oid FROM pg_database WHERE datname = 'db_one'")
OID_TWO=$(pg_psql "$SRC" "SELECT oid FROM pg_database WHERE datname = 'db_two'")

# give_up MSG: a step the rest depends on failed; count it and end with the summary.
give_up() {
    pb_test_fail "$1"
    pb_test_summary
    exit 1
}

pb backup --type full >"$PB_WORK/backup.out" 2>&1 ||
    { cat "$PB_WORK/backup.out"; give_up "full backup failed"; }
q "UPDATE t SET v = v || 'x' WHERE id % 10 = 0" db_one
q "DELETE FROM t WHERE id > 15000" db_two
q "UPDATE t SET v = 'changed' WHERE id <= 1000"
pb backup >"$PB_WORK/backup.out" 2>&1 || { cat "$PB_WORK/backup.out"; give_up "incremental failed"; }
INCR=$(pb_last_id)
q "INSERT INTO t SELECT g, 'late' FROM generate_series(20001, 21000) g" db_one
q "SELECT pg_create_restore_point('rp')"
for db in postgres db_one db_two; do
    printf -v "DIG_$db" %s "$(pg_digest "$SRC" "$db")"
done
seg=$(pg_psql "$SRC" "SELECT pg_walfile_name(pg_switch_wal())")
for i in $(seq 1 300); do
    last=$(pg_psql "$SRC" "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
    [[ "${last:8:16}" < "${seg:8:16}" ]] || break
    sleep 0.1
done

D=$PB_WORK/restored
mkdir -p "$D" && chmod 0700 "$D" && _pb_chown_pg "$D"

# ---- an unknown name: refused, nothing written
out=$(pb restore --target-dir "$D" --set "$INCR" --db-include db_one --db-include nope 2>&1)
if [ $? != 0 ] && grep -q "db-include nope" <<<"$out" && [ -z "$(ls -A "$D")" ]; then
    pb_test_ok "an unknown database name is refused before anything is written"
else
    pb_test_fail "unknown database name: $out"
fi

# restore_into ARGS...: restore (into D, kept) to the restore point, then start D.
restore_into() {
    pb restore --target-dir "$D" --set "$INCR" --target-name rp "$@" >"$PB_WORK/restore.out" \
        2>&1 || { cat "$PB_WORK/restore.out" >&2; return 1; }
}
start_d() {
    pg_reconfigure "$D" && pg_conf "$D" "archive_mode = off" && pg_start "$D" &&
        pb_wait_recovery "$D"
}
drop() { pg_psql "$D" "DROP DATABASE $1" >/dev/null; }
# nonempty_rel_files OID: relation files of database OID with data, in the restored D.
nonempty_rel_files() {
    find "$D/base/$1" -type f -regex '.*/[0-9]+\(_[a-z]+\)?\(\.[0-9]+\)?' -size +0c | wc -l
}

# ---- restore db_one only
pb_check "restore --db-include db_one" restore_into --db-include db_one ||
    give_up "restore --db-include failed"
pb_assert_eq "$(nonempty_rel_files "$OID_TWO")" 0 "db_two's relation files are empty stubs"
pb_check "db_two keeps PG_VERSION" test -s "$D/base/$OID_TWO/PG_VERSION"
pb_check "db_one's relation files are restored" test "$(nonempty_rel_files "$OID_ONE")" -gt 0
start_d || give_up "the restored cluster did not start"
pb_assert_eq "$(pg_digest "$D" db_one)" "$DIG_db_one" "db_one equals the source at the target"
pb_assert_eq "$(pg_digest "$D" postgres)" "$DIG_postgres" "postgres is always restored"
pb_check "amcheck of db_one" "$PB_PGBIN/pg_amcheck" --install-missing --heapallindexed \
    -h "$(pg_sockdir "$D")" -p "$(pg_port "$D")" -U postgres -d db_one -d postgres
pb_check "the left-out db_two can be dropped" drop db_two
pb_check "and its directory is gone" test ! -e "$D/base/$OID_TWO"
pg_stop "$D"
pb_check "pg_checksums of the partial cluster" pg_checksums_check "$D"

# ---- delta restore without --db-include: everything back
pb_check "delta restore of every database" restore_into --delta || give_up "delta failed"
start_d || give_up "the delta-restored cluster did not start"
pb_assert_eq "$(pg_digest "$D" db_two)" "$DIG_db_two" "delta: db_two is back and equal"
pb_assert_eq "$(pg_digest "$D" db_one)" "$DIG_db_one" "delta: db_one equal"
pg_stop "$D"

# ---- delta restore with --db-include db_two: db_one becomes the stub
pb_check "delta restore --db-include db_two" restore_into --delta --db-include db_two ||
    give_up "delta --db-include failed"
pb_assert_eq "$(nonempty_rel_files "$OID_ONE")" 0 "delta: db_one's relation files are stubs"
start_d || give_up "the cluster did not start"
pb_assert_eq "$(pg_digest "$D" db_two)" "$DIG_db_two" "delta: db_two equal"
pb_check "delta: db_one can be dropped" drop db_one
pg_stop "$D"

# ---- rebase: the synthetic full carries the database list
pb rebase --set "$INCR" >"$PB_WORK/rebase.out" 2>&1 || cat "$PB_WORK/rebase.out"
SYN=$(pb_last_id)
mkdir -p "$PB_WORK/x" && _pb_chown_pg "$PB_WORK/x"
out=$(pb restore --target-dir "$PB_WORK/x" --set "$SYN" --db-include nope 2>&1)
if [ "${SYN:15:1}" = S ] && grep -q "no such database (it has: .*db_two" <<<"$out"; then
    pb_test_ok "the synthetic full $SYN has the database list"
else
    pb_test_fail "database list of the synthetic full $SYN: $out"
fi

# ---- verify checks the list: a damaged one is reported, naming the object
if [ "$PB_REPO_KIND" = posix ]; then
    pb_check "verify: the repository is clean" pb verify >"$PB_WORK/verify.out" 2>&1
    obj=$PB_REPO/backup/$INCR/databases
    printf '\xff' | dd of="$obj" bs=1 seek=40 conv=notrunc status=none
    out=$(pb verify 2>&1)
    if [ $? != 0 ] && grep -q "backup/$INCR/databases" <<<"$out"; then
        pb_test_ok "verify reports the damaged database list"
    else
        pb_test_fail "damaged database list: $out"
    fi
fi
pb_test_summary
