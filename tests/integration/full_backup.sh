#!/bin/bash
# Full online backup while pgbench writes, WAL archive, byte-exact restore.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" "${PB_SCALE:-5}" || pb_die "pgbench init failed"

# 1. Full backup of a quiet cluster: restore to consistency must equal the source.
pb_check "full backup of a quiet cluster" pb backup --type full
ID1=$(pb_last_id)
DIGEST1=$(pg_digest_all "$SRC")
pb_check "restore of the quiet backup starts" pb_restore_start "$PB_WORK/r1" --set "$ID1"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r1")" "$DIGEST1" "restored digests equal the source"
pb_check "amcheck passes on the restored cluster" pg_amcheck_all "$PB_WORK/r1"
pg_stop "$PB_WORK/r1"
pb_check "pg_checksums --check passes on the restored cluster" pg_checksums_check "$PB_WORK/r1"

# 2. Full backup while pgbench writes (from before it until it ends, 20 s at most);
# replay to a point after the load stopped.
pgbench_run_until_bg "$SRC" "$PB_WORK/load.stop" 20 2
pb_wait_pgbench "$SRC" 2
pb_check "full backup under pgbench load" pb backup --type full
ID2=$(pb_last_id)
touch "$PB_WORK/load.stop"
pgbench_wait || pb_test_fail "pgbench failed during the backup"
DIGEST2=$(pg_digest_all "$SRC")
LSN=$(pg_psql "$SRC" "SELECT pg_current_wal_lsn()")
pb_archive_all "$SRC" || pb_test_fail "the WAL up to $LSN was not archived"
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb_check "restore under load to LSN $LSN" pb_restore_start "$PB_WORK/r2" --set "$ID2" \
    --target-lsn "$LSN"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r2")" "$DIGEST2" "digests at the target LSN equal the source"
pb_check "amcheck passes after replay" pg_amcheck_all "$PB_WORK/r2"
pg_stop "$PB_WORK/r2"
pb_check "pg_checksums --check passes after replay" pg_checksums_check "$PB_WORK/r2"

# 3. The default target (consistency at the backup's end) starts and is sane.
pb_check "restore to the backup's end starts" pb_restore_start "$PB_WORK/r3" --set "$ID2"
pb_check "amcheck at the backup's end" pg_amcheck_all "$PB_WORK/r3"
pg_stop "$PB_WORK/r3"

# 4. Verify reads every frame back.
pb_check "verify the backup" pb verify --set "$ID2"
pb_test_summary
