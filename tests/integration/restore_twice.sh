#!/bin/bash
# A copy restored to a restore point, promoted and backed up, restored again: the first
# restore's recovery settings (recovery_target_name, restore_command) travel in the
# copy's postgresql.auto.conf into its backups. The second restore comments them out
# before it writes its own, so the second copy starts (PostgreSQL refuses "multiple
# recovery targets" otherwise) and holds the first copy's rows.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" || pb_die "initdb failed"
pg_start "$SRC" || pb_die "source cluster did not start"
pg_psql "$SRC" "CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 100) g" >/dev/null
pg_env "$SRC"
pb_check "full backup of the source" pb_backup_logged --type full --checkpoint fast
pg_psql "$SRC" "INSERT INTO t SELECT g FROM generate_series(101, 200) g" >/dev/null
pg_psql "$SRC" "SELECT pg_create_restore_point('rp1')" >/dev/null
pg_psql "$SRC" "INSERT INTO t SELECT g FROM generate_series(201, 300) g" >/dev/null
pb_archive_all "$SRC" || pb_die "the source's WAL was not archived"

# The first copy: to rp1, promoted (timeline 2), archiving into the same repository.
R1=$PB_WORK/r1
mkdir -p "$R1" && chmod 0700 "$R1" && _pb_chown_pg "$R1"
pb restore --target-dir "$R1" --target-name rp1 --archive-mode preserve \
    >"$PB_WORK/restore1.out" 2>&1 || { cat "$PB_WORK/restore1.out"; pb_die "restore to rp1 failed"; }
pg_stop "$SRC"
pg_reconfigure "$R1" && pg_start "$R1" && pb_wait_recovery "$R1" ||
    pb_die "the first copy did not promote"
pb_assert_eq "$(pg_psql "$R1" "SELECT count(*) FROM t")" 200 "the first copy stopped at rp1"
pg_psql "$R1" "INSERT INTO t SELECT g FROM generate_series(1001, 1050) g" >/dev/null
pg_env "$R1"
pb_check "full backup of the first copy" pb_backup_logged --type full --checkpoint fast
ID=$(pb_last_id)
pb_archive_all "$R1" || pb_die "the first copy's WAL was not archived"
pb_check "the first copy's backup carries the first restore's target" \
    grep -q "recovery_target_name" "$R1/postgresql.auto.conf"

# The second copy, from the first copy's backup, to that backup's end.
R2=$PB_WORK/r2
if pb_restore_start "$R2" --set "$ID"; then
    pb_assert_eq "$(pg_psql "$R2" "SELECT count(*) FROM t")" 250 \
        "the second copy holds the first copy's rows"
    pb_check "the earlier restore's target is commented out" \
        grep -q "^# replaced by pageback restore: recovery_target_name" "$R2/postgresql.auto.conf"
else
    pb_test_fail "the second copy starts (restore of $ID): $(tail -n 3 "$(pg_logfile "$R2")")"
fi
pb_rm_bg "$R2"
pg_stop "$R1"
pb_test_summary
