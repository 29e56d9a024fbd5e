#!/bin/bash
# Scattered changed pages of an incremental share big frames: an UPDATE touching one row
# on every few pages of pgbench_accounts (and its index) is stored in frames of up to
# 128 pages each (engine/backup/backup_internal.h, BK_SCATTERED_PAGES), not of 32, so the
# incremental has few frames and its restore reads few; the chain restores exactly.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 2
pg_psql "$SRC" "VACUUM FREEZE" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb backup --type full >"$PB_WORK/full.out" 2>&1 || { cat "$PB_WORK/full.out" >&2; pb_die "full failed"; }
FULL=$(pb_last_id)
# About 1,000 rows, each on its own page of the table (61 rows a page at scale 2).
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 200 = 0" \
    >/dev/null || pb_die "update failed"
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb backup --type incr >"$PB_WORK/incr.out" 2>&1 || { cat "$PB_WORK/incr.out" >&2; pb_die "incr failed"; }
INCR=$(pb_last_id)
DIGEST=$(pg_digest_all "$SRC")
read -r CHANGED STORED <<<"$(pb_info_fields "$INCR" pages_changed bytes_stored)"
# restore_frames SET DIR: restore SET into DIR; print the frames it read.
restore_frames() {
    mkdir -p "$2" && chmod 0700 "$2" && _pb_chown_pg "$2"
    pb restore --target-dir "$2" --set "$1" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
    sed -n 's/^restored backup.* \([0-9]*\) frames read.*/\1/p' "$PB_WORK/restore.out"
}
FULL_FRAMES=$(restore_frames "$FULL" "$PB_WORK/rfull") || pb_die "restore of the full failed"
rm -rf "$PB_WORK/rfull"
D=$PB_WORK/rchain
CHAIN_FRAMES=$(restore_frames "$INCR" "$D") || pb_die "restore of the chain failed"
EXTRA=$((CHAIN_FRAMES - FULL_FRAMES))
pb_log "incremental: $CHANGED pages changed, $STORED bytes stored; restore reads" \
    "$FULL_FRAMES frames (full), $CHAIN_FRAMES (chain)"
# Frames of 32 pages would cost ~1 frame per 30 changed pages here.
pb_check "chain restore reads $EXTRA frames more than the full's for $CHANGED changed pages (<= 1 per 60)" \
    test $((EXTRA * 60)) -le "${CHANGED:-0}"
# One row a page: ~0.62 KiB a page in shared 128-page frames, ~0.7 KiB in 32-page ones.
pb_check "incremental: $((STORED / (CHANGED ? CHANGED : 1))) bytes per changed page (<= 660)" \
    test "$STORED" -le $((CHANGED * 660))

pg_reconfigure "$D" && pg_conf "$D" "archive_mode = off"
if pg_start "$D" && pb_wait_recovery "$D"; then
    pb_assert_eq "$(pg_digest_all "$D")" "$DIGEST" "restore of full + incremental equals the source"
    pg_stop "$D"
    pb_check "restored chain: pg_checksums --check" pg_checksums_check "$D"
else
    pb_test_fail "restored chain starts"
fi
pb_test_summary
