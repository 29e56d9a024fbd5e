#!/bin/bash
# Flushes per backup (issue 10): a full and an unchanged incremental run under strace,
# every fsync/fdatasync/sync_file_range/syncfs/msync and rename of the backup process
# counted. The bounds are what docs/DESIGN.md's data-safety rules need (docs/BENCHMARKS.md,
# "Flushes per backup"): each pack's data, one fsync per directory that received new
# names, the manifest's data and its directory, the catalog's RocksDB open; the writer
# lock and the catalog's apply flush nothing. A restore of the incremental closes.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
command -v strace >/dev/null || pb_die "strace not installed (tools/deps.sh)"
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" "${PB_SCALE:-2}" || pb_die "pgbench init failed"
pg_psql "$SRC" "VACUUM FREEZE" >/dev/null
pg_digest_all "$SRC" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null
DIGEST=$(pg_digest_all "$SRC")
FLUSHES=fsync,fdatasync,sync_file_range,syncfs,msync,rename,renameat,renameat2

# traced NAME ARGS...: one backup under strace; its trace in $PB_WORK/trace.NAME.
traced() {
    local name=$1
    shift
    : >"$PB_WORK/trace.$name" && _pb_chown_pg "$PB_WORK/trace.$name"
    _pb_as_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres \
        PGDATABASE=postgres strace -f -y -qq -o "$PB_WORK/trace.$name" -e trace=$FLUSHES \
        "$PB_BIN" backup "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" "$@" >/dev/null 2>&1
}
# count NAME CALL...: how many of those calls the trace holds.
# sync_file_range with flags 0 (RocksDB probing for support) writes nothing, and with
# SYNC_FILE_RANGE_WRITE alone it only starts writeback (the pack writer's pacing) and waits
# for nothing: neither is counted.
count() {
    local name=$1 re
    shift
    re=$(IFS='|'; echo "$*")
    grep -E "^[0-9]+ +($re)\(" "$PB_WORK/trace.$name" |
        grep -cvE 'sync_file_range\(.*, (0|SYNC_FILE_RANGE_WRITE)\) '
}
show() {
    echo "-- $1: $(count "$1" fsync fdatasync sync_file_range syncfs msync) flushes," \
        "$(count "$1" rename renameat renameat2) renames"
    grep -E "^[0-9]+ +[a-z_0-9]+\(" "$PB_WORK/trace.$1" | sed -E 's/^[0-9]+ +//' |
        sed -E 's/[0-9a-f]{16,}/X/g; s/\.[0-9]+\.tmp/.N.tmp/g' | sort | uniq -c | sort -rn
}

pb_check "full backup under strace" traced full --type full
show full
pb_check "incremental backup under strace" traced incr --type incr
show incr
# Each pack 2 (its data, its directory), the backup's directories, databases and manifest
# 2 each, the catalog's RocksDB open (new MANIFEST, CURRENT, OPTIONS, their directory;
# more when it is created): a full at most 2 x packs + 18, an unchanged incremental 17.
# Before issue 10's cuts: the writer lock 3 and the catalog's apply 2 more.
PACKS=$(grep -cE 'fdatasync\(.*/pack/' "$PB_WORK/trace.full")
FULLF=$(count full fsync fdatasync sync_file_range syncfs msync)
INCRF=$(count incr fsync fdatasync sync_file_range syncfs msync)
pb_check "full: $FULLF flushes for $PACKS packs (at most 2 x packs + 18)" \
    test "$FULLF" -le $((2 * PACKS + 18))
pb_check "unchanged incremental: $INCRF flushes (at most 17)" test "$INCRF" -le 17
pb_check "the writer lock flushes nothing" \
    bash -c "! grep -E '(fsync|fdatasync)\(.*lock' '$PB_WORK/trace.full' '$PB_WORK/trace.incr'"
pb_check "the catalog's apply flushes nothing (its WAL is never synced)" \
    bash -c "! grep -E '(fsync|fdatasync)\(.*/[0-9]+\.log>' '$PB_WORK/trace.full' '$PB_WORK/trace.incr'"

# What a power loss can leave of what is no longer flushed, and the next backup right:
# the catalog as it was before the last apply (its head one backup behind), and a writer
# lock file whose text never reached the disk (empty, nobody holding it).
cp -a "$PB_STATE" "$PB_WORK/state.full" # after the full, before the incremental's apply
pb_check "incremental" pb backup --type incr
rm -rf "$PB_STATE" && cp -a "$PB_WORK/state.full" "$PB_STATE"
LOCAL=$([ "${PB_REPO_KIND:-local}" = s3 ] && echo 0 || echo 1) # the lock file is posix's
[ "$LOCAL" = 1 ] && mkdir -p "$PB_REPO/lock" && : >"$PB_REPO/lock/writer" &&
    _pb_chown_pg "$PB_REPO/lock"
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid <= 5000" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null
DIGEST=$(pg_digest_all "$SRC")
OUT=$(pb backup --type incr 2>&1)
pb_check "after the lost apply and the empty lock, the next incremental succeeds" \
    test $? -eq 0
[ "$LOCAL" = 1 ] &&
    pb_check "it took the empty lock over" grep -q "taking over the writer lock" <<<"$OUT"
pb_check "it rebuilt the catalog from the repository" grep -q "rebuilding the catalog" <<<"$OUT"
ID=$(pb_last_id)
pb_check "restore of that incremental starts" pb_restore_start "$PB_WORK/r" --set "$ID"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r")" "$DIGEST" "restored digests equal the source"
pb_test_summary
