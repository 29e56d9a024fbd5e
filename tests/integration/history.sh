#!/bin/bash
# History order, not id order (trust issue, defect 1, and expire's part of defect 3): a
# full, incr 1 (row A), incr 2 (row B), then `rebase --set <incr 1>` — a synthetic full
# of an older state whose id sorts last. A default restore must hold row B; info lists
# the backups in the order of the state they hold; a time target just after incr 2
# chooses incr 2; the next incremental builds on incr 2; expire --retain-full keeps every
# backup a kept one needs, and after a new full removes the old chain and only the WAL
# before the kept backup's start.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
q "CREATE TABLE r (tag text PRIMARY KEY)" >/dev/null
q "CREATE TABLE tick (n int)" >/dev/null

archive_all() {
    local seg last i
    seg=$(q "SELECT pg_walfile_name(pg_switch_wal())")
    for i in $(seq 1 300); do
        last=$(q "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        [[ "${last:8:16}" < "${seg:8:16}" ]] || return 0
        sleep 0.1
    done
    return 1
}

rows() { pg_psql "$1" "SELECT coalesce(string_agg(tag, ',' ORDER BY tag), '') FROM r"; }
N=0
# restored LABEL EXPECTED_ROWS EXPECTED_SET RESTORE_ARGS...
restored() {
    local label=$1 exp=$2 set=$3 d
    shift 3
    N=$((N + 1))
    d=$PB_WORK/r$N
    if ! pb_restore_start "$d" "$@"; then
        pb_test_fail "$label: restore or recovery failed"
        return 1
    fi
    pb_assert_eq "$(sed -n 's/^restored backup \([^ ]*\) .*/\1/p' "$PB_WORK/restore.out")" \
        "$set" "$label: restored backup $set"
    pb_assert_eq "$(rows "$d")" "$exp" "$label: rows $exp"
    pg_stop "$d"
    rm -rf "$d"
}

pb_backup_id F --type full
q "INSERT INTO r VALUES ('A')" >/dev/null
pb_backup_id I1
q "INSERT INTO r VALUES ('B')" >/dev/null
pb_backup_id I2
pb_next_second # a target time in a later second than incr 2's end (1 s resolution)
T_AFTER_I2=$(PGTZ=UTC q "SELECT now()")
q "INSERT INTO tick VALUES (1)" >/dev/null # a commit after the target time, archived
archive_all || pb_die "WAL after incr 2 was not archived"
out=$(pb rebase --set "$I1" 2>&1) || { echo "$out"; pb_die "rebase failed"; }
S=$(sed -n 's/^synthetic full backup \([^ ]*\) written.*/\1/p' <<<"$out")
pb_log "backups: F=$F I1=$I1 I2=$I2 S=$S (rebase of I1)"
pb_check "the synthetic full's id sorts after incr 2's" test "$S" \> "$I2"
pb_assert_eq "$(pb_info_field "$S" stop_lsn)" "$(pb_info_field "$I1" stop_lsn)" \
    "the synthetic full has the stop LSN of incr 1"
pb_assert_eq "$(pb_ids)" "$F $I1 $S $I2" "info lists backups in history order"

restored "default restore (latest)" "A,B" "$I2"
restored "time target after incr 2: the newest backup before it" "A,B" "$I2" \
    --target-time "$T_AFTER_I2"
restored "--set of the synthetic full" "A" "$S" --set "$S"

q "INSERT INTO r VALUES ('C')" >/dev/null
pb_backup_id I3
pb_assert_eq "$(pb_info_field "$I3" parent)" "$I2" "the next incremental builds on incr 2"
restored "restore of the next incremental" "A,B,C" "$I3"

out=$(pb expire --retain-full 1 2>&1) || { echo "$out"; pb_test_fail "expire failed"; }
pb_assert_eq "$(pb_ids)" "$F $I1 $S $I2 $I3" \
    "expire --retain-full 1 keeps every backup that the kept ones need"
restored "restore after expire" "A,B,C" "$I3"

q "INSERT INTO r VALUES ('D')" >/dev/null
pb_backup_id F2 --type full
START_F2=$(pb_info_field "$F2" start_wal)
out=$(pb expire --retain-full 1 2>&1) || { echo "$out"; pb_test_fail "second expire failed"; }
pb_assert_eq "$(pb_ids)" "$F2" "after a new full, expire --retain-full 1 keeps it alone"
OLDEST_WAL=$(pb info --json | python3 -c "
import json, sys
print(min(w['first'] for w in json.load(sys.stdin)['wal'] if w['timeline'] == 1))")
pb_assert_eq "$OLDEST_WAL" "$START_F2" "WAL before the kept full's start is removed, not after"
restored "restore after the second expire" "A,B,C,D" "$F2"
pb_test_summary
