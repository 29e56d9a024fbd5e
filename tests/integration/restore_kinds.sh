#!/bin/bash
# What kind of recovery a restore sets up, and that it says so in one line. Without a
# target the copy replays the archived WAL to its end and promotes (what a DBA restoring
# a lost primary expects, pgBackRest's type=default); --target-immediate stops where the
# backup is consistent. --type standby writes standby.signal: the copy replays the
# archive and stays in recovery, following what is archived later, and streams from its
# primary with --primary-conninfo. A standby with a target, and --primary-conninfo
# without a standby, are usage errors.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
PB_TARGET_IMMEDIATE=false # this script checks the default itself (pb_lib.sh)
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
rows() { pg_psql "$1" "SELECT count(*) FROM t"; }
q "CREATE TABLE t (n int)" >/dev/null
q "INSERT INTO t SELECT generate_series(1, 10)" >/dev/null
pb_check "full backup" pb_backup_logged --type full --checkpoint fast
F=$(pb_last_id)
q "INSERT INTO t SELECT generate_series(11, 20)" >/dev/null
pb_archive_all "$SRC" || pb_die "WAL not archived"

# ---- the default: to the end of the archived WAL
if pb_restore_start "$PB_WORK/end"; then
    pb_assert_eq "$(rows "$PB_WORK/end")" 20 "a restore without a target reaches the newest archived WAL"
    grep -q "recovery will replay archived WAL to its end, then promote" "$PB_WORK/restore.out" &&
        pb_test_ok "restore says it replays to the end" ||
        pb_test_fail "no line on recovery: $(cat "$PB_WORK/restore.out")"
    pg_stop "$PB_WORK/end"
else
    pb_test_fail "default restore"
fi

# ---- --target-immediate: the backup's end
if pb_restore_start "$PB_WORK/imm" --target-immediate; then
    pb_assert_eq "$(rows "$PB_WORK/imm")" 10 "--target-immediate stops at the backup's end"
    grep -q "recovery will stop where backup $F is consistent" "$PB_WORK/restore.out" &&
        pb_test_ok "restore says it stops at the backup's consistency point" ||
        pb_test_fail "no line on recovery: $(cat "$PB_WORK/restore.out")"
    pg_stop "$PB_WORK/imm"
else
    pb_test_fail "--target-immediate restore"
fi

# standby_start DIR ARGS...: restore a standby into DIR and start it (it stays in recovery).
standby_start() {
    local d=$1
    shift
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    pb restore --target-dir "$d" --type standby "$@" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
    pg_reconfigure "$d" && pg_start "$d"
}
# wait_rows DIR N: until DIR's cluster shows N rows (up to a minute).
wait_rows() {
    local i
    for i in $(seq 1 600); do
        [ "$(rows "$1" 2>/dev/null)" = "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# ---- a standby from the archive
STB=$PB_WORK/standby
if standby_start "$STB"; then
    [ -e "$STB/standby.signal" ] && [ ! -e "$STB/recovery.signal" ] &&
        pb_test_ok "--type standby writes standby.signal and no recovery.signal" ||
        pb_test_fail "signal files: $(ls "$STB"/*.signal 2>&1)"
    grep -q "recovery_target_timeline = 'latest'" "$STB/postgresql.auto.conf" &&
        ! grep -q "recovery_target_action\|recovery_target = " "$STB/postgresql.auto.conf" &&
        pb_test_ok "the standby follows the latest timeline and has no target" ||
        pb_test_fail "standby settings: $(tail -n 8 "$STB/postgresql.auto.conf")"
    grep -q "recovery will run as a standby" "$PB_WORK/restore.out" &&
        pb_test_ok "restore says the copy runs as a standby" ||
        pb_test_fail "no line on recovery: $(cat "$PB_WORK/restore.out")"
    wait_rows "$STB" 20 && pb_test_ok "the standby replayed the archive (20 rows)" ||
        pb_test_fail "the standby has $(rows "$STB") rows, not 20"
    q "INSERT INTO t SELECT generate_series(21, 30)" >/dev/null
    pb_archive_all "$SRC"
    wait_rows "$STB" 30 && pb_test_ok "the standby replays WAL archived after it started" ||
        pb_test_fail "the standby has $(rows "$STB") rows, not 30"
    pb_assert_eq "$(pg_psql "$STB" 'SELECT pg_is_in_recovery()')" t "the standby stays in recovery"
    pg_stop "$STB"
else
    pb_test_fail "standby restore"
fi

# ---- a standby that streams from its primary
STR=$PB_WORK/stream
CONN="host=$(pg_sockdir "$SRC") port=$(pg_port "$SRC") user=postgres"
if standby_start "$STR" --primary-conninfo "$CONN"; then
    grep -q "primary_conninfo = '$CONN'" "$STR/postgresql.auto.conf" &&
        pb_test_ok "primary_conninfo is written" ||
        pb_test_fail "primary_conninfo: $(tail -n 8 "$STR/postgresql.auto.conf")"
    wait_rows "$STR" 30 || pb_test_fail "the streaming standby did not catch up: $(rows "$STR")"
    q "INSERT INTO t SELECT generate_series(31, 40)" >/dev/null # not archived: streamed
    wait_rows "$STR" 40 && pb_test_ok "the standby streams from its primary (rows not archived yet)" ||
        pb_test_fail "the streaming standby has $(rows "$STR") rows, not 40"
    pb_assert_eq "$(pg_psql "$STR" 'SELECT status FROM pg_stat_wal_receiver')" streaming \
        "its WAL receiver is streaming"
    pg_stop "$STR"
else
    pb_test_fail "streaming standby restore"
fi

# ---- refused combinations
mkdir -p "$PB_WORK/bad" && _pb_chown_pg "$PB_WORK/bad"
out=$(pb restore --target-dir "$PB_WORK/bad" --type standby --target-immediate 2>&1)
pb_assert_eq "$?" 2 "--type standby with a target is a usage error"
out=$(pb restore --target-dir "$PB_WORK/bad" --primary-conninfo "$CONN" 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "type standby" <<<"$out" &&
    pb_test_ok "--primary-conninfo without --type standby is a usage error" ||
    pb_test_fail "--primary-conninfo alone: rc $rc: $out"
pb_assert_eq "$(ls -A "$PB_WORK/bad")" "" "refused restores write nothing"
pg_stop "$SRC"
pb_test_summary
