#!/bin/bash
# tests/integration/memory_bound.sh — a backup's memory is bounded by configuration, not
# by the work (issue 12). Two incrementals of one cluster (pgbench -s 5), one after an
# update of 5,000 rows and one after an update of all 500,000: the WAL window of the
# second names some 1.5 million block references, which the WAL-guided read collects in
# a block set of fixed size (engine/walguide.c; a build that holds up to 2 Mi entries
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
if pb_restore_start "$PB_WORK/rs" --set "$LAST"; then
    pb_assert_eq "$(pg_digest_all "$PB_WORK/rs")" "$DIGEST" "the chain restores to the source's contents"
    pg_stop "$PB_WORK/rs"
else
    pb_test_fail "restore of the chain"
fi
pb_test_summary
