#!/bin/bash
# A backup from a standby that ends at a segment boundary. When the last record the
# standby replayed is a segment switch, its minimum recovery point (the backup's end)
# is the first byte of the next segment, and recovery reads the record there before it
# calls the backup's end reached: the backup is complete only once that segment is in
# the repository. With the primary idle (no archive_timeout) the backup must wait for
# it and, within --wal-timeout, fail naming the segment; after the primary writes and
# switches, the backup completes and restores.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
PRI=$PB_WORK/primary
STB=$PB_WORK/standby
pg_init_cluster "$PRI" || pb_die "initdb failed"
# Nothing but the test writes on the primary (autovacuum's analyze would add WAL after
# the switch and move the standby's end off the boundary).
pg_conf "$PRI" "wal_keep_size = 256MB" "autovacuum = off"
pg_start "$PRI" || pb_die "primary did not start"
pg_psql "$PRI" "CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 1000) g" >/dev/null

mkdir -p "$STB" && chmod 0700 "$STB" && _pb_chown_pg "$STB"
_pb_as_pg "$PB_PGBIN/pg_basebackup" -D "$STB" -R -X stream -c fast -h "$(pg_sockdir "$PRI")" \
    -p "$(pg_port "$PRI")" -U postgres >"$PB_WORK/basebackup.out" 2>&1 ||
    { cat "$PB_WORK/basebackup.out"; pb_die "pg_basebackup failed"; }
pg_reconfigure "$STB" && pg_start "$STB" || pb_die "standby did not start"

# replayed: wait until the standby has replayed everything the primary wrote.
replayed() {
    local end i
    end=$(pg_psql "$PRI" "SELECT pg_current_wal_lsn()")
    for i in $(seq 1 300); do
        [ "$(pg_psql "$STB" "SELECT pg_last_wal_replay_lsn() >= '$end'")" = t ] && return 0
        sleep 0.1
    done
    echo "the standby did not replay up to $end" >&2
    return 1
}

# boundary_backup: rows, a checkpoint (so that the standby can make a restartpoint) and
# a segment switch as the primary's last records; a standby backup then ends where the
# switch left off. Sets OUT, RC and STOP.
boundary_backup() {
    pg_psql "$PRI" "INSERT INTO t SELECT g FROM generate_series(1, 1000) g" >/dev/null
    pg_psql "$PRI" "CHECKPOINT" >/dev/null
    pb_archive_all "$PRI" && replayed || pb_die "the primary's WAL was not archived and replayed"
    pg_env "$STB"
    OUT=$(pb backup --type full --checkpoint fast --wal-timeout 5 2>&1)
    RC=$?
    pg_env "$PRI"
    STOP=$(sed -n 's/.* from a standby ends at \([0-9A-F]*\/[0-9A-F]*\) .*/\1/p' <<<"$OUT" | head -1)
    [ "$(pg_psql "$PRI" "SELECT ('${STOP:-0/1}'::pg_lsn - '0/0') % 16777216 = 0")" = t ]
}

# The standby's records between the switch and the backup (a running-transactions
# snapshot) can move the end off the boundary: one more try then.
boundary_backup || boundary_backup
if [ "$(pg_psql "$PRI" "SELECT ('${STOP:-0/1}'::pg_lsn - '0/0') % 16777216 = 0")" != t ]; then
    pb_test_fail "the standby's backup ends at a segment boundary (it ends at '$STOP'): $OUT"
elif [ $RC = 0 ]; then
    pb_test_fail "a standby backup ending at $STOP completed without the segment that begins there"
else
    pb_check "the backup waits for, and names, the segment that begins at its end ($STOP)" \
        grep -q "$(pg_psql "$PRI" "SELECT pg_walfile_name('$STOP'::pg_lsn + 1)").*not in repository" \
        <<<"$OUT"
fi
DIGEST_ROWS=$(pg_psql "$PRI" "SELECT count(*) FROM t")

# The same backup completes once the primary writes and switches while it waits.
pg_env "$STB"
pb backup --type full --checkpoint fast --wal-timeout 120 >"$PB_WORK/backup.out" 2>&1 &
BK=$!
pg_env "$PRI"
for i in $(seq 1 300); do
    grep -q "from a standby ends at" "$PB_WORK/backup.out" && break
    sleep 0.1
done
pg_psql "$PRI" "INSERT INTO t SELECT g FROM generate_series(1, 10) g" >/dev/null
pb_archive_all "$PRI" || pb_die "the primary's next segment was not archived"
if wait $BK; then
    pb_test_ok "the standby's backup completes once the segment is archived"
else
    cat "$PB_WORK/backup.out" >&2
    pb_test_fail "the standby's backup completes once the segment is archived"
fi
ID=$(pb_last_id)
pg_env "$PRI"
d=$PB_WORK/restored
if pb_restore_start "$d" --set "$ID"; then
    pb_assert_eq "$(pg_psql "$d" "SELECT count(*) FROM t")" "$DIGEST_ROWS" \
        "the restored copy holds the rows the standby had replayed"
else
    pb_test_fail "restore of the standby's backup $ID"
fi
pb_rm_bg "$d"
pg_stop "$STB"
pb_test_summary
