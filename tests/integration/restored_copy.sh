#!/bin/bash
# A restored copy started with the settings it was restored with (the source's
# archive_command among them) must not push its new timeline into the source's
# repository: restore writes archive_mode = off (and says so) unless --archive-mode
# preserve is given.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster "autovacuum = off"
pg_psql "$SRC" "CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g" >/dev/null
pb_check "full backup" pb_backup_logged --type full --checkpoint fast
pb_check "WAL archived" pb_archive_all "$SRC"
pg_stop "$SRC"

tl2() { find "$PB_REPO" -name "00000002*" -not -name "*.tmp.*" | sort; }
# copy DIR ARGS...: restore into DIR, give it a port (nothing else: it keeps the
# archive settings the restore left), start it, wait for the promotion, write and
# switch WAL on its new timeline.
copy() {
    local d=$1
    shift
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    pb restore --target-dir "$d" "$@" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
    pg_reconfigure "$d" && pg_start "$d" && pb_wait_recovery "$d" || return 1
    pg_psql "$d" "INSERT INTO t SELECT g FROM generate_series(1, 1000) g" >/dev/null &&
        pg_psql "$d" "SELECT pg_switch_wal()" >/dev/null
}

pb_check "restore and start a copy (default)" copy "$PB_WORK/off"
grep -q "archive_mode = off written to .*postgresql.auto.conf" "$PB_WORK/restore.out" &&
    pb_test_ok "restore says archive_mode = off is written" ||
    pb_test_fail "no log line about archive_mode: $(cat "$PB_WORK/restore.out")"
pb_assert_eq "$(pg_psql "$PB_WORK/off" "SHOW archive_mode")" off "the copy runs with archive_mode off"
pb_assert_eq "$(pg_psql "$PB_WORK/off" "SELECT timeline_id FROM pg_control_checkpoint()")" 2 \
    "the copy promoted to timeline 2"
sleep 3 # what archiving there is would have run by now (the archiver polls every second)
pb_assert_eq "$(tl2)" "" "nothing of timeline 2 entered the repository"
pg_stop "$PB_WORK/off"

pb_check "restore and start a copy with --archive-mode preserve" \
    copy "$PB_WORK/keep" --archive-mode preserve
grep -q "archive-mode preserve" "$PB_WORK/restore.out" &&
    pb_test_ok "restore says the source's archive_mode is kept" ||
    pb_test_fail "no log line about archive_mode: $(cat "$PB_WORK/restore.out")"
for i in $(seq 1 100); do [ -n "$(tl2)" ] && break; sleep 0.2; done
pb_assert_ne "$(tl2)" "" "with preserve, the copy archives its timeline 2"
pg_stop "$PB_WORK/keep"

out=$(pb restore --target-dir "$PB_WORK/bad" --archive-mode on 2>&1) &&
    pb_test_fail "--archive-mode on accepted" ||
    { grep -q "off or preserve" <<<"$out" && pb_test_ok "--archive-mode on is refused" ||
        pb_test_fail "--archive-mode on: $out"; }
pb_test_summary
