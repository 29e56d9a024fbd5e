#!/bin/bash
# tests/integration/rebase_flushes.sh — flushes per rebase, counted as
# flushes.sh counts a backup's: the rebase runs under strace and every
# fsync/fdatasync/sync_file_range/syncfs/msync of its process is counted. A rebase defers
# its directory syncs as a backup does (repo_defer_syncs, engine/storage/storage.h): each
# pack's data and the database list's once, each directory that got new names once
# before the manifest commits, the manifest's data and directory: packs + 6 (7 here, one
# pack). Before 2026-12-02 every pack and the database list paid their
# directory's sync as well: 2 x packs + 6 (8 here; the backup's directory synced 3 times).
# Then the synthetic full restores to the source's contents. pgbench -s 1; fast (about
# 15 seconds).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
command -v strace >/dev/null || pb_die "strace not installed (tools/deps.sh)"
pb_pgbench_source 1
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb_check "full backup" pb backup --type full --quiet
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 20 = 0" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb_check "incremental backup" pb backup --type incr --quiet
DIGEST=$(pg_digest_all "$SRC")
FLUSHES=fsync,fdatasync,sync_file_range,syncfs,msync
TRACE=$PB_WORK/trace.rebase
: >"$TRACE" && _pb_chown_pg "$TRACE"
_pb_as_pg strace -f -y -qq -o "$TRACE" -e trace=$FLUSHES \
    "$PB_BIN" rebase "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" >"$PB_WORK/rebase.log" 2>&1
pb_check "rebase under strace" test $? -eq 0
# sync_file_range with SYNC_FILE_RANGE_WRITE alone (the pack writer's pacing) or flags 0
# waits for nothing: not counted.
FL=$(grep -E "^[0-9]+ +(fsync|fdatasync|sync_file_range|syncfs|msync)\(" "$TRACE" |
    grep -cvE 'sync_file_range\(.*, (0|SYNC_FILE_RANGE_WRITE)\) ')
PACKS=$(grep -cE 'fdatasync\(.*/pack/' "$TRACE")
DIRS=$(grep -E "^[0-9]+ +fsync\(" "$TRACE" | sed -E 's/^[0-9]+ +fsync\([0-9]+<([^>]*)>.*/\1/' |
    sort | uniq -c | sort -rn)
pb_log "rebase: $FL flushes for $PACKS pack(s); directory syncs:"
echo "$DIRS" >&2
# Each pack's data 1, the database list's data 1, the directories that got new names
# (pack/, the backup's, backup/) once each, the manifest's data and directory: packs + 6;
# then the record of committed backups (backup.info and its copy, their directory once):
# packs + 9.
pb_check "rebase: $FL flushes for $PACKS pack(s) (at most packs + 9)" \
    test "$FL" -le $((PACKS + 9))
pb_check "the backup's directory is synced twice at most (its names, then the manifest)" \
    test -z "$(echo "$DIRS" | awk '$1 > 2')"
pb_check "every other directory once" \
    test -z "$(echo "$DIRS" | grep -v 'S-[0-9a-f-]*$' | awk '$1 > 1')"
ID=$(pb_last_id)
pb_check "restore of the synthetic full starts" pb_restore_start "$PB_WORK/r" --set "$ID"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r")" "$DIGEST" "restored digests equal the source"
pb_test_summary
