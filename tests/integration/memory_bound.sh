#!/bin/bash
# tests/integration/memory_bound.sh — a backup's memory is bounded by configuration, not
# by the work. Two incrementals of one cluster (pgbench -s 5), one after an
# update of 5,000 rows and one after an update of all 500,000: the WAL window of the
# second names some 1.5 million block references, which the WAL-guided read collects in
# a block set of fixed size (engine/backup/walguide.c; a build that holds up to 2 Mi entries
# grows by tens of MiB), so the second's peak RSS (--report peak_rss_bytes) stays within
# a few MiB of the first's. Both still restore to the source's contents. Also: an
# incremental streams its parent's manifest once, progress on or off (--report
# backup_requests: the same GETs as a --quiet one; a build whose progress plan streams
# the parent a second time makes more). Fast: about a minute.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source 5
q() { pg_psql "$SRC" "$1" >/dev/null; }
pb_report_dir
backup() { # NAME ARGS...: one backup with --report $OUT/NAME.json
    local name=$1 out
    shift
    out=$(pb backup --report "$OUT/$name.json" "$@" 2>&1) && echo "$out" >"$PB_WORK/$name.log" ||
        { echo "$out" >&2; pb_test_fail "backup $name ($*) failed"; return 1; }
    pb_test_ok "backup $name ($*)"
}
rss_mib() { pb_json "$OUT/$1.json" '["peak_rss_bytes"] // 1048576'; }
gets() { # NAME: plain and ranged GETs of the backup
    python3 -c "import json, sys; r = json.load(open(sys.argv[1]))['backup_requests']; print(r['get'] + r['get_range'])" \
        "$OUT/$1.json" 2>/dev/null
}

q "VACUUM FREEZE"
q "CHECKPOINT"
backup full --type full
# The full's compression queue keeps its workers busy and no more (engine/backup/backup_pipe.c,
# bk_pipe_jobs_for: 2 frames of 1 MiB per worker and the reader's; 12 before, which a
# reader faster than compression fills whatever the database's size).
jobs=$(pb_json "$OUT/full.json" '["io_applied"]["pipe_jobs"]') workers=$(pb_json "$OUT/full.json" '["stages"]["workers"]')
pb_log "full: peak RSS $(rss_mib full) MiB, $jobs compression buffers for ${workers:-?} workers"
if [ -n "$jobs" ] && [ -n "$workers" ] && [ "$jobs" -le $((2 * workers + 1)) ]; then
    pb_test_ok "the full's compression queue is $jobs frames for $workers workers"
else
    pb_test_fail "the full's compression queue is ${jobs:-?} frames for ${workers:-?} workers"
fi
q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 5000"
q "CHECKPOINT"
backup small --type incr --progress-interval 1
q "UPDATE pgbench_accounts SET abalance = abalance + 1"
q "CHECKPOINT"
backup large --type incr --progress-interval 1

small=$(rss_mib small) large=$(rss_mib large)
pb_log "peak RSS: incremental after 5,000 rows ${small} MiB, after 500,000 rows ${large} MiB"
if [ -n "$small" ] && [ -n "$large" ] && [ "$large" -le $((small + 10)) ]; then
    pb_test_ok "the large incremental's peak RSS ($large MiB) is within 10 MiB of the small one's ($small MiB)"
else
    pb_test_fail "peak RSS grew with the WAL volume: $small MiB -> $large MiB"
fi

# The GETs of quiet incrementals and then one with progress, back to back on a settled
# cluster, reading by the file-level skip alone (no WAL segments fetched, whose count
# follows the server's segment switches). Each backup's plan streams the whole chain,
# one manifest more each time, and the backup streams its parent once: from the third
# on, each step costs the same GETs, progress on or off.
q "VACUUM FREEZE"
q "CHECKPOINT"
backup settle --type incr --quiet
for n in 1 2 3; do
    backup quiet$n --type incr --incremental-mode file --quiet
done
backup progress --type incr --incremental-mode file --progress-interval 1
LAST=$(pb_last_id)
g1=$(gets quiet2) g2=$(gets quiet3) g3=$(gets progress)
pb_log "GETs (plain + ranged): quiet incrementals $(gets quiet1), $g1 and $g2, then one with progress $g3"
pb_assert_eq "$((g3 - g2))" "$((g2 - g1))" "an incremental with progress makes no GETs more than a quiet one"

DIGEST=$(pg_digest_all "$SRC")
pb_restore_digest "the chain restores to the source's contents" "restore of the chain" \
    "$PB_WORK/rs" "$DIGEST" --set "$LAST"
# archive-push: one 16 MiB segment is read and compressed in pieces, so a
# push holds the compressed object and a MiB, not the segment and its copy. Measured
# against the push of a history file (the same process, libraries and repository open,
# no segment): a build that reads the segment whole needs 16 MiB more. The WAL is of a
# table of repeated text (it compresses well, so the compressed object is small). Into a
# repository of its own: the chain's archive is not touched.
q "CREATE TABLE fill AS SELECT repeat('pageback', 60) AS t FROM generate_series(1, 40000)"
seg=$(pg_psql "$SRC" "SELECT pg_walfile_name(pg_switch_wal())")
mkdir -p "$PB_WORK/push" && cp "$SRC/pg_wal/$seg" "$PB_WORK/push/$seg" &&
    printf '1\t0/5000000\tno recovery target specified\n' >"$PB_WORK/push/00000002.history" &&
    _pb_chown_pg "$PB_WORK/push"
push_kib() { # FILE: peak RSS (KiB) of archive-push FILE into $PB_WORK/push-repo
    _pb_as_pg /usr/bin/time -f %M -o "$PB_WORK/push/rss" "$PB_BIN" archive-push \
        "$PB_WORK/push/$1" --repo "$PB_WORK/push-repo" >/dev/null 2>&1 && cat "$PB_WORK/push/rss"
}
mkdir -p "$PB_WORK/push-repo" && _pb_chown_pg "$PB_WORK/push-repo"
base=$(push_kib 00000002.history) one=$(push_kib "$seg")
pb_log "archive-push peak RSS: history file ${base:-?} KiB, 16 MiB segment $seg ${one:-?} KiB"
if [ -n "$base" ] && [ -n "$one" ] && [ "$one" -le $((base + 8 * 1024)) ]; then
    pb_test_ok "archive-push of a segment holds less than 8 MiB more than of a history file ($((one - base)) KiB)"
else
    pb_test_fail "archive-push of a segment: ${one:-?} KiB peak RSS, a history file's ${base:-?} KiB"
fi
_pb_as_pg "$PB_BIN" archive-get "$seg" "$PB_WORK/push/back" --repo "$PB_WORK/push-repo" >/dev/null 2>&1
pb_assert_eq "$(cmp "$PB_WORK/push/$seg" "$PB_WORK/push/back" && echo same)" same \
    "the pushed segment comes back byte for byte"
pb_test_summary
