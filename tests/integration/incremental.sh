#!/bin/bash
# A full backup and a chain of incrementals, each after a different workload; every
# backup of the chain restored and compared; delta restore; rebase; lost state dir.
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about what a chain of incrementals restores.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" "${PB_SCALE:-5}" || pb_die "pgbench init failed"
psql_src() { pg_psql "$SRC" "$@" >/dev/null; }
psql_src "CREATE EXTENSION IF NOT EXISTS pgcrypto" 2>/dev/null ||
    psql_src "SELECT 1" # gen_random_uuid is built in since PostgreSQL 13
psql_src "CREATE TABLE uuids (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v text)"
psql_src "CREATE TABLE doomed (id int PRIMARY KEY, pad text)"
psql_src "INSERT INTO doomed SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g"
mkdir -p "$PB_WORK/ts1" && _pb_chown_pg "$PB_WORK/ts1"
# Tablespace directories of the restores, owned by postgres (who runs pageback).
tsdir() { mkdir -p "$PB_WORK/ts-$1" && _pb_chown_pg "$PB_WORK/ts-$1" && echo "$PB_WORK/ts-$1"; }

IDS=()
declare -A DIGEST
backup() {
    local want=$1 out id
    shift
    out=$(pb backup "$@" 2>&1) || { echo "$out" >&2; pb_test_fail "backup ($want) failed"; return 1; }
    id=$(pb_last_id)
    [ "${id:15:1}" = "$want" ] && pb_test_ok "backup $id is of type $want" ||
        { echo "$out" >&2; pb_test_fail "backup $id: expected type $want"; }
    IDS+=("$id")
    DIGEST[$id]=$(pg_digest_all "$SRC")
}

# Settle hint bits and the visibility map first, so "no change" really means none.
psql_src "VACUUM FREEZE"
pg_digest_all "$SRC" >/dev/null
psql_src "CHECKPOINT"
backup F
FULL=${IDS[0]}
# The cluster's size in pages: an incremental reads only what changed, so its
# own pages_scanned is no measure of the whole.
FULLPAGES=$(pb_info_field "$FULL" pages_scanned)

# 1. No change: an incremental ships (almost) nothing.
backup I
NOCHANGE=${IDS[1]}
CHANGED=$(pb_info_field "$NOCHANGE" pages_changed)
SCANNED=$FULLPAGES
pb_check "unchanged cluster: $CHANGED of $SCANNED pages shipped (< 0.5%)" \
    test $((CHANGED * 200)) -lt "$SCANNED"

# 2. pgbench updates of ~1% of the accounts (contiguous), plus UUID inserts.
ROWS=$(pg_psql "$SRC" "SELECT count(*) FROM pgbench_accounts")
psql_src "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= $((ROWS / 100))"
backup I
ONE=${IDS[2]}
CHANGED=$(pb_info_field "$ONE" pages_changed)
SCANNED=$FULLPAGES
pb_check "1% of accounts updated: $CHANGED of $SCANNED pages shipped (0.3%..5%)" \
    test $((CHANGED * 300)) -gt "$SCANNED" -a $((CHANGED * 20)) -lt "$SCANNED"
psql_src "INSERT INTO uuids (v) SELECT md5(g::text) FROM generate_series(1, 20000) g"
psql_src "SELECT pg_create_restore_point('after_uuids')"

# 3. DELETE + VACUUM, TRUNCATE, new tablespace.
psql_src "DELETE FROM pgbench_history WHERE tid % 2 = 0"
psql_src "VACUUM pgbench_history"
psql_src "TRUNCATE doomed"
psql_src "INSERT INTO doomed SELECT g, repeat('y', 100) FROM generate_series(1, 5000) g"
psql_src "CREATE TABLESPACE ts1 LOCATION '$PB_WORK/ts1'"
psql_src "CREATE TABLE in_ts (id int, v text) TABLESPACE ts1"
psql_src "INSERT INTO in_ts SELECT g, md5(g::text) FROM generate_series(1, 30000) g"
backup I

# 4. VACUUM FULL, CLUSTER-like rewrite, CREATE/DROP TABLE, CREATE DATABASE.
psql_src "VACUUM FULL pgbench_tellers"
psql_src "VACUUM FULL uuids"
psql_src "DROP TABLE doomed"
psql_src "CREATE TABLE fresh AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 10000) g"
psql_src "CREATE DATABASE db2"
pg_psql "$SRC" "CREATE TABLE t2 AS SELECT g FROM generate_series(1, 5000) g" db2 >/dev/null
pgbench_run_bg "$SRC" 2 2
pgbench_wait
backup I

# 5. Lose the catalog: the next incremental rebuilds it from the repository.
rm -rf "$PB_STATE" && mkdir -p "$PB_STATE" && _pb_chown_pg "$PB_STATE"
psql_src "DROP DATABASE db2"
psql_src "UPDATE in_ts SET v = 'changed' WHERE id % 10 = 0"
psql_src "CREATE DATABASE db3"
pg_psql "$SRC" "CREATE TABLE t3 AS SELECT g FROM generate_series(1, 3000) g" db3 >/dev/null
backup I
LAST=${IDS[-1]}
TSOID=$(pg_psql "$SRC" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")

# Restore every backup of the chain into a fresh directory and compare.
n=0
for id in "${IDS[@]}"; do
    n=$((n + 1))
    # Against S3 (slower per request) the full and the newest are enough; the posix
    # run restores every backup of the chain.
    if [ "$PB_REPO_KIND" = s3 ] && [ "$id" != "$FULL" ] && [ "$id" != "$LAST" ] &&
        [ "$n" != 1 ]; then
        continue
    fi
    d=$PB_WORK/r$n
    if pb_restore_start "$d" --set "$id" --tablespace-map "$TSOID=$(tsdir r$n)"; then
        pb_assert_eq "$(pg_digest_all "$d")" "${DIGEST[$id]}" "restore of $id: digests equal the source at its stop point"
        pg_stop "$d"
        pb_check "restore of $id: pg_checksums --check" pg_checksums_check "$d"
    else
        pb_test_fail "restore of $id"
    fi
done

# Delta restore of the newest backup over the restore of the full.
pb_check "delta restore of $LAST over the restore of $FULL" \
    pb restore --target-dir "$PB_WORK/r1" --set "$LAST" --delta --tablespace-map "$TSOID=$(tsdir r1)"
rm -f "$PB_WORK/r1/postmaster.pid"
pg_reconfigure "$PB_WORK/r1" && pg_conf "$PB_WORK/r1" "archive_mode = off"
if pg_start "$PB_WORK/r1" && pb_wait_recovery "$PB_WORK/r1"; then
    pb_assert_eq "$(pg_digest_all "$PB_WORK/r1")" "${DIGEST[$LAST]}" "delta restore: digests equal"
    pg_stop "$PB_WORK/r1"
else
    pb_test_fail "delta-restored cluster starts"
fi
grep -q "pages already right" "$PB_WORK/restore.out" 2>/dev/null || true

# Non-empty target without --delta/--force is refused.
pb restore --target-dir "$PB_WORK/r2" --set "$LAST" >/dev/null 2>&1 &&
    pb_test_fail "restore into a non-empty directory should be refused" ||
    pb_test_ok "restore into a non-empty directory is refused"

# Rebase: a synthetic full from the chain, restorable on its own.
pb_check "rebase the chain" pb rebase
SYN=$(pb_last_id)
pb_assert_eq "${SYN:15:1}" S "rebase made a synthetic full"
if pb_restore_start "$PB_WORK/rs" --set "$SYN" --tablespace-map "$TSOID=$(tsdir rs)"; then
    pb_assert_eq "$(pg_digest_all "$PB_WORK/rs")" "${DIGEST[$LAST]}" "restore of the synthetic full: digests equal"
    pg_stop "$PB_WORK/rs"
else
    pb_test_fail "restore of the synthetic full"
fi
pb_check "verify the synthetic full" pb verify --set "$SYN"

# Expire: keep one chain (the synthetic full); its restore still works.
pb_check "expire --retain-full 1" pb expire --retain-full 1
pb_assert_eq "$(pb info --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["backups"]))')" 1 \
    "only the synthetic full remains"
pb_check "verify after expire" pb verify
pb_test_summary
