#!/bin/bash
# Flushes per backup: a full and an unchanged incremental run under strace,
# every fsync/fdatasync/syncfs/msync (what flushes) and rename of the backup process
# counted, its writeback waits (sync_file_range, which flushes nothing) counted apart,
# and the bytes it writes into the state directory. The bounds are what
# docs/DESIGN.md's data-safety rules need (docs/BENCHMARKS.md, "Flushes per backup" and
# "Fixed costs per backup"): each pack's data, the database list's,
# one fsync per directory that received new names before the manifest commits, the
# manifest's data and its directory, the catalog's RocksDB open (its MANIFEST, CURRENT
# and OPTIONS files; no table file); the writer lock and the catalog's apply flush
# nothing. Then what a power loss can leave (a catalog one backup behind, a torn
# write-ahead log, an empty lock file) and a restore of the last incremental.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
command -v strace >/dev/null || pb_die "strace not installed (tools/deps.sh)"
pb_source_pgbench "${PB_SCALE:-2}"
# 16 MB of random bytes: packs of more than the writer's lag (4 MiB), so the pacing waits
# for writeback (sync_file_range with WAIT flags), which flushes nothing.
pg_psql "$SRC" "CREATE TABLE noise AS SELECT decode(string_agg(md5(random()::text), ''), 'hex')
    AS b FROM generate_series(1, 1000000) g GROUP BY g % 100000" >/dev/null
pg_psql "$SRC" "VACUUM FREEZE" >/dev/null
pg_digest_all "$SRC" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null
DIGEST=$(pg_digest_all "$SRC")
FLUSHES=fsync,fdatasync,sync_file_range,syncfs,msync,rename,renameat,renameat2
TRACED=$FLUSHES,write,pwrite64,writev,pwritev

# traced NAME ARGS...: one backup under strace; its trace in $PB_WORK/trace.NAME, its
# report in $PB_WORK/reports/NAME.json.
traced() {
    local name=$1
    shift
    : >"$PB_WORK/trace.$name" && _pb_chown_pg "$PB_WORK/trace.$name"
    mkdir -p "$PB_WORK/reports" && _pb_chown_pg "$PB_WORK/reports"
    _pb_as_pg env PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER=postgres \
        PGDATABASE=postgres strace -f -y -qq -o "$PB_WORK/trace.$name" -e trace=$TRACED \
        "$PB_BIN" backup "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" \
        --report "$PB_WORK/reports/$name.json" "$@" >/dev/null 2>&1
}
# count NAME CALL...: how many of those calls the trace holds. Only fsync, fdatasync,
# syncfs and msync flush (they reach the device's cache and commit metadata);
# sync_file_range never does, whatever its flags (sync_file_range(2): "does not flush disk
# write caches"): the pack writer's pacing starts writeback (SYNC_FILE_RANGE_WRITE) and
# waits for ranges written long ago (WAIT_BEFORE|WRITE|WAIT_AFTER), RocksDB probes it with
# flags 0. Those are counted apart (waits). The --report file's own flush is this
# script's, not the backup's: not counted.
count() {
    local name=$1 re
    shift
    re=$(IFS='|'; echo "$*")
    grep -E "^[0-9]+ +($re)\(" "$PB_WORK/trace.$name" | grep -cv "<$PB_WORK/reports[/>]"
}
# waits NAME: the writeback waits (sync_file_range with SYNC_FILE_RANGE_WAIT_AFTER).
waits() { grep -cE '^[0-9]+ +sync_file_range\(.*SYNC_FILE_RANGE_WAIT_AFTER' "$PB_WORK/trace.$1"; }
# repo_flushes NAME: the flushes of the repository's files and directories in the trace.
repo_flushes() { grep -cE "^[0-9]+ +(fsync|fdatasync)\([0-9]+<$PB_REPO[/>]" "$PB_WORK/trace.$1"; }
# state_bytes NAME: bytes the backup wrote into files of the state directory (the
# catalog's RocksDB files and the manifest spools).
state_bytes() {
    grep -E "^[0-9]+ +(write|pwrite64|writev|pwritev)\([0-9]+<$PB_STATE/" "$PB_WORK/trace.$1" |
        sed -E 's/.*= ([0-9]+)$/\1/' | awk '{s += $1} END {print s + 0}'
}
state_flushes() { grep -cE "^[0-9]+ +(fsync|fdatasync)\([0-9]+<$PB_STATE[/>]" "$PB_WORK/trace.$1"; }
show() {
    echo "-- $1: $(count "$1" fsync fdatasync syncfs msync) flushes ($(state_flushes "$1") in the" \
        "state directory), $(waits "$1") writeback waits, $(count "$1" rename renameat renameat2)" \
        "renames, $(state_bytes "$1") bytes written into the state directory"
    grep -E "^[0-9]+ +[a-z_0-9]+\(" "$PB_WORK/trace.$1" | grep -vE "^[0-9]+ +(write|pwrite64|writev|pwritev)\(" |
        sed -E 's/^[0-9]+ +//' |
        sed -E 's/[0-9a-f]{16,}/X/g; s/\.[0-9]+\.tmp/.N.tmp/g' | sort | uniq -c | sort -rn
}

pb_check "full backup under strace" traced full --type full
show full
pb_check "incremental backup under strace" traced incr --type incr
show incr
# Each pack's data 1, the database list's 1, the directories that got new names once
# each before the manifest (pack/, the backup's, backup/, and the root when backup/ is
# new), the manifest 2 (data, directory), the catalog's RocksDB open (a new MANIFEST,
# CURRENT, OPTIONS and their directory: 5; 10 when it is created), the lock directory's
# creation 1: a first full at most packs + 18, an unchanged incremental packs + 11 (one
# pack per worker that stored something: 1 or 2 here). Before 2026-12-02: each
# pack 2 and the backup's directory 3 times (full 2 x packs + 18: 22 here), and the
# catalog's open wrote a table file (incremental 2 x packs + 15: 17 with one pack).
# Since December 2026 the record of committed backups after the commit adds 3 (the
# data of backup.info and of its copy, and their directory once): packs + 21 and + 14.
PACKS=$(grep -cE 'fdatasync\(.*/pack/' "$PB_WORK/trace.full")
IPACKS=$(grep -cE 'fdatasync\(.*/pack/' "$PB_WORK/trace.incr")
FULLF=$(count full fsync fdatasync syncfs msync)
INCRF=$(count incr fsync fdatasync syncfs msync)
pb_log "full: $FULLF flushes and $(waits full) writeback waits (counted as flushes before: $((FULLF + $(waits full))))"
pb_check "full: $FULLF flushes for $PACKS packs (at most packs + 21)" \
    test "$FULLF" -le $((PACKS + 21))
pb_check "unchanged incremental: $INCRF flushes for $IPACKS packs (at most packs + 14)" \
    test "$INCRF" -le $((IPACKS + 14))
# The trace and the driver's count (repo_io_counts, the report's repo_flushes) agree on
# the repository's flushes; the pacing waited for writeback, and none of it was one.
if [ "${PB_REPO_KIND:-local}" != s3 ]; then
    for b in full incr; do
        pb_assert_eq "$(repo_flushes $b)" "$(pb_json "$PB_WORK/reports/$b.json" '["io_applied"]["repo_flushes"]')" \
            "$b: the repository flushes in the trace are the report's repo_flushes"
    done
fi
FWAITS=$(waits full)
pb_check "the full's pacing waited for writeback ($FWAITS waits, not flushes)" test "$FWAITS" -gt 0
pb_check "the catalog's open writes no table file" \
    bash -c "! grep -E '(fsync|fdatasync)\(.*\.sst>' '$PB_WORK/trace.incr'"
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
# A torn write-ahead log: the last apply (in the newest log, none of them ever synced)
# cut in the middle. The replay keeps a prefix: the head is the one before, or none.
LOG=$(ls "$PB_STATE"/*.log 2>/dev/null | sort | tail -n 1)
pb_check "the catalog keeps its write-ahead logs (no table file at open)" test -n "$LOG"
[ -n "$LOG" ] && truncate -s $(($(stat -c %s "$LOG") / 2)) "$LOG"
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 3 WHERE aid <= 3000" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null
DIGEST=$(pg_digest_all "$SRC")
OUT=$(pb backup --type incr 2>&1)
pb_check "after the torn write-ahead log, the next incremental succeeds" test $? -eq 0
pb_check "it rebuilt the catalog from the repository" grep -q "rebuilding the catalog" <<<"$OUT"
ID=$(pb_last_id)
pb_check "restore of that incremental starts" pb_restore_start "$PB_WORK/r" --set "$ID"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r")" "$DIGEST" "restored digests equal the source"
pb_test_summary
