#!/bin/bash
# The reading thread does not wait at a file's end for that file's last frames (polite I/O):
# a file's record waits for them in the pending queue (engine/backup/backup_records.c) while the
# next files are read. A full backup of a pgbench cluster (about a thousand small files,
# each ending in a frame still compressing) reports records that waited at once
# (--report's io_applied.manifest_pending_peak, bounded by BK_PENDING_FILES = 64) and
# almost no drain wait (--report's stages.drain_wait_seconds: only the one wait before
# pg_backup_stop); an incremental after a change the same; and the chain restores to the
# source's rows. A build whose reader drains at every file end reports no pending count.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source 1
pb_report_dir
q() { pg_psql "$SRC" "$1" >/dev/null; }

backup() {
    local name=$1 out
    shift
    out=$(pb backup --report "$OUT/$name.json" "$@" 2>&1) ||
        { echo "$out" >&2; pb_test_fail "backup $name ($*) failed"; return 1; }
    pb_test_ok "backup $name ($*)"
}
io() { pb_json "$OUT/$1.json" "[\"io_applied\"][\"$2\"]"; }
stage() { pb_json "$OUT/$1.json" "[\"stages\"][\"$2\"]"; }

# check NAME: records waited for their frames (1..64 at once), drain wait near 0.
check() {
    local peak drain scan
    peak=$(io "$1" manifest_pending_peak)
    drain=$(stage "$1" drain_wait_seconds)
    scan=$(stage "$1" scan_seconds)
    [ -n "$peak" ] && [ "$peak" -ge 1 ] && [ "$peak" -le 64 ] &&
        pb_test_ok "$1: up to $peak records waited for their frames while the reader went on" ||
        pb_test_fail "$1: manifest_pending_peak '$peak' (want 1..64)"
    # One wait before pg_backup_stop for the last frames: a few ms (a loaded machine may
    # starve the SCHED_IDLE workers a little: 2% of the scan on top); the old reader
    # waited at every file end (0.48 s of a scale-1 full here).
    [ -n "$drain" ] && [ -n "$scan" ] &&
        python3 -c "import sys; sys.exit(0 if $drain < 0.2 + 0.02 * $scan else 1)" &&
        pb_test_ok "$1: drain wait $drain s of a $scan s scan (no wait at file ends)" ||
        pb_test_fail "$1: drain_wait_seconds '$drain' of a '$scan' s scan (want < 0.2 + 2%)"
}

backup full --type full && check full
q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = 0"
q "CREATE TABLE t_after AS SELECT g AS id FROM generate_series(1, 20000) g"
q "CHECKPOINT"
backup incr --type incr --incremental-mode scan && check incr

state() { pg_psql "$1" "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || '/' ||
    (SELECT count(*) FROM t_after)"; }
WANT=$(state "$SRC")
D=$PB_WORK/r1
if pb_restore_start "$D"; then
    pb_assert_eq "$(state "$D")" "$WANT" "restore of full + incremental holds the source's rows"
    pg_stop "$D"
else
    pb_test_fail "restore of the chain or its recovery failed"
fi
rm -rf "$D"
pb_test_summary
