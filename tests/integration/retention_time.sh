#!/bin/bash
# Retention beyond a count of fulls. `expire --set ID` removes one backup and the
# incrementals built on it (listed as such), never the newest backup of the newest
# timeline, and an unknown id is named. `--retain-full-days D` keeps every full of the
# last D days and the newest full older than that (the window's start stays restorable,
# as pgBackRest's repo-retention-full-type=time): "now" is moved by the test-only
# PAGEBACK_TEST_RETENTION_NOW, since a test cannot wait days. `--retain-archive N` keeps
# continuous WAL only from the newest N fulls; an older kept full keeps its own WAL
# (start to stop) and restores to its end.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
has_wal() { [ -e "$PB_REPO/wal/$1.zst" ] || ls "$PB_REPO"/wal/*/"$1".zst >/dev/null 2>&1; }
seg_after() { printf '%s%016X' "${1:0:8}" $((16#${1:8:16} + 1)); }
# backup TYPE: a row (n counts backups), a closed segment, a later second, then the
# backup; prints its id.
backup() {
    q "INSERT INTO t SELECT count(*) + 1 FROM t" >/dev/null
    pb_archive_all "$SRC" || pb_die "WAL not archived"
    pb_next_second
    pb_backup_logged ${1:+--type $1} --checkpoint fast || pb_die "backup $n failed"
    pb_last_id
}
q "CREATE TABLE t (n int)" >/dev/null
F1=$(backup full); I1=$(backup); F2=$(backup full); I2=$(backup); F3=$(backup full)
# WAL between F3 and F4 that neither needs for its own consistency
for k in 1 2 3; do q "INSERT INTO t VALUES (100)" >/dev/null; pb_archive_all "$SRC"; done
F4=$(backup full)
pb_archive_all "$SRC"
ALL="$F1 $I1 $F2 $I2 $F3 $F4"
pb_assert_eq "$(pb_ids)" "$ALL" "six backups: two chains of a full and an incremental, two fulls"

# ---- expire --set
out=$(pb expire --set "$I2" --dry-run 2>&1)
grep -q "would expire backup $I2" <<<"$out" && ! grep -q "backup $F2" <<<"$out" &&
    pb_test_ok "expire --set INCR --dry-run lists only that incremental" ||
    pb_test_fail "expire --set INCR --dry-run: $out"
out=$(pb expire --set "$F1" --dry-run 2>&1)
grep -q "would expire backup $F1\$" <<<"$out" &&
    grep -q "would expire backup $I1 (built on $F1" <<<"$out" &&
    pb_test_ok "expire --set FULL lists the incremental built on it" ||
    pb_test_fail "expire --set FULL --dry-run: $out"
pb_assert_eq "$(pb_ids)" "$ALL" "expire --set --dry-run removes nothing"
out=$(pb expire --set "$F4" 2>&1)
rc=$?
[ "$rc" != 0 ] && grep -q "$F4.*newest backup of the newest timeline" <<<"$out" &&
    pb_test_ok "expire --set of the newest backup is refused and names it" ||
    pb_test_fail "expire --set NEWEST: rc $rc: $out"
out=$(pb expire --set 20990101-000000F 2>&1)
rc=$?
[ "$rc" != 0 ] && grep -q "20990101-000000F" <<<"$out" &&
    pb_test_ok "expire --set of an unknown id names it" || pb_test_fail "unknown id: rc $rc: $out"
out=$(pb expire --set "$F1" --retain-full 2 2>&1)
rc=$?
pb_assert_eq "$rc" 2 "expire with --set and --retain-full is a usage error"
pb_assert_eq "$(pb_ids)" "$ALL" "refused expires remove nothing"

# ---- --retain-full-days: the window starts at F3's stop; F2 is the newest full before it
F3_STOP=$(pb_info_field "$F3" stop_time)
NOW=$((F3_STOP + 86400))
out=$(PAGEBACK_TEST_RETENTION_NOW=$NOW pb expire --retain-full-days 1 --dry-run 2>&1)
grep -q "would expire backup $F1" <<<"$out" && grep -q "would expire backup $I1" <<<"$out" &&
    ! grep -q "expire backup $F2" <<<"$out" && ! grep -q "expire backup $I2" <<<"$out" &&
    pb_test_ok "--retain-full-days --dry-run: the fulls before the window go except the newest of them" ||
    pb_test_fail "--retain-full-days --dry-run: $out"
expire_at() { PAGEBACK_TEST_RETENTION_NOW=$1 pb expire "${@:2}" >/dev/null; }
pb_check "expire --retain-full-days 1" expire_at "$NOW" --retain-full-days 1
pb_assert_eq "$(pb_ids)" "$F2 $I2 $F3 $F4" "the window (F3, F4) and the full before it (F2, with its incremental) stay"
out=$(pb expire --set "$F2" 2>&1)
grep -q "expired backup $I2 (built on $F2" <<<"$out" &&
    pb_test_ok "expire --set removes a full with its incremental and says so" ||
    pb_test_fail "expire --set FULL: $out"
pb_assert_eq "$(pb_ids)" "$F3 $F4" "F2 and I2 are gone"

# ---- --retain-archive 1: continuous WAL from F4's start; F3 keeps its own
F3_START=$(pb_info_field "$F3" start_wal); F3_END=$(pb_info_field "$F3" stop_wal)
F4_START=$(pb_info_field "$F4" start_wal)
GAP=$(seg_after "$F3_END")
has_wal "$GAP" && [[ "${GAP:8}" < "${F4_START:8}" ]] ||
    pb_die "no archived segment between F3 ($F3_END) and F4 ($F4_START)"
out=$(pb expire --retain-full 2 --retain-archive 1 2>&1) ||
    pb_test_fail "expire --retain-archive: $out"
pb_assert_eq "$(pb_ids)" "$F3 $F4" "--retain-archive removes no backup"
has_wal "$GAP" && pb_test_fail "segment $GAP between F3 and F4 was kept" ||
    pb_test_ok "WAL between F3's stop and F4's start is expired"
has_wal "$F3_START" && has_wal "$F3_END" && pb_test_ok "F3's own WAL (start and stop) is kept" ||
    pb_test_fail "F3's own WAL is gone: $out"
has_wal "$F4_START" && pb_test_ok "F4's WAL is kept" || pb_test_fail "F4's start WAL is gone"
out=$(pb verify 2>&1) && grep -q "removed by expire --retain-archive" <<<"$out" &&
    pb_test_ok "verify passes and names the WAL --retain-archive removed" ||
    pb_test_fail "verify after --retain-archive: $out"
R=$PB_WORK/r3
if pb_restore_start "$R" --set "$F3" --target-immediate; then
    pb_assert_eq "$(pg_psql "$R" 'SELECT max(n) FROM t')" 5 "F3 restores to its end (5 rows)"
    pg_stop "$R"
else
    pb_test_fail "restore of F3 after --retain-archive"
fi

# ---- every full older than the window: the newest of them stays
NOW=$((F3_STOP + 30 * 86400))
pb_check "expire --retain-full-days 7 a month later" expire_at "$NOW" --retain-full-days 7
pb_assert_eq "$(pb_ids)" "$F4" "a window without a full keeps the newest full before it"
pg_stop "$SRC"
pb_test_summary
