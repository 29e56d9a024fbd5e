#!/bin/bash
# The weekly job (`rebase && expire --retain-full 2`) run twice in a row: the second
# rebase has nothing new (the chain head is its synthetic full already), says so and
# writes nothing; the second expire then keeps last week's full, its incremental and its
# WAL (the PITR window). `expire --dry-run` lists what would go and removes nothing. Two
# synthetic fulls of one state (rebase --set of the same incremental twice) count as
# one full for --retain-full.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
wal_count() { find "$PB_REPO/wal" -name '0*.zst' ! -name '*.history.zst' | wc -l; }
q "CREATE TABLE t (n int)" >/dev/null
q "INSERT INTO t VALUES (1)" >/dev/null
pb_check "full" pb_backup_logged --type full --checkpoint fast
F=$(pb_last_id)
q "INSERT INTO t VALUES (2)" >/dev/null
q "SELECT pg_switch_wal()" >/dev/null
pb_check "incremental" pb_backup_logged --checkpoint fast
I=$(pb_last_id)
pb_archive_all "$SRC" || pb_die "WAL not archived"

# ---- the weekly job, once
pb_check "rebase" pb rebase
S=$(pb_ids | tr ' ' '\n' | grep -v -e "$F" -e "$I")
pb_assert_eq "${S:15:1}" S "the rebase wrote a synthetic full"
pb_check "expire --retain-full 2" pb expire --retain-full 2
pb_assert_eq "$(pb_ids)" "$F $I $S" "the first expire keeps the full, its incremental and the synthetic full"
WAL=$(wal_count)

# ---- and again
out=$(pb rebase 2>&1)
rc=$?
pb_assert_eq "$rc" 0 "the second rebase exits 0"
grep -q "nothing to rebase" <<<"$out" && pb_test_ok "the second rebase says it has nothing new" ||
    pb_test_fail "the second rebase did not say so: $out"
pb_assert_eq "$(pb_ids)" "$F $I $S" "the second rebase wrote nothing"
out=$(pb expire --retain-full 1 --dry-run 2>&1)
rc=$?
pb_assert_eq "$rc" 0 "expire --dry-run exits 0"
grep -q "would expire backup $I" <<<"$out" && grep -q "would expire backup $F" <<<"$out" &&
    pb_test_ok "expire --dry-run lists what would go" ||
    pb_test_fail "expire --dry-run: $out"
pb_assert_eq "$(pb_ids)" "$F $I $S" "expire --dry-run removed no backup"
pb_assert_eq "$(wal_count)" "$WAL" "expire --dry-run removed no WAL"
pb_check "the second expire --retain-full 2" pb expire --retain-full 2
pb_assert_eq "$(pb_ids)" "$F $I $S" "the second expire keeps last week's full and incremental"
pb_assert_eq "$(wal_count)" "$WAL" "the second expire keeps their WAL"

# ---- two synthetic fulls of one state count once
pb_check "rebase --set the incremental again" pb rebase --set "$I"
S2=$(pb_ids | tr ' ' '\n' | grep -v -e "$F" -e "$I" -e "$S")
pb_assert_eq "$(pb_info_field "$S2" stop_lsn)" "$(pb_info_field "$S" stop_lsn)" \
    "the second synthetic full holds the same state"
pb_check "expire --retain-full 2 with two copies of one state" pb expire --retain-full 2
pb_assert_eq "$(pb_ids | tr ' ' '\n' | grep -c -e "$F" -e "$I")" 2 \
    "two fulls of one stop LSN count once: the full and its incremental stay"
pb_check "verify" pb verify
pg_stop "$SRC"
pb_test_summary
