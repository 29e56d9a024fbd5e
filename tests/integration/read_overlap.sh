#!/bin/bash
# tests/integration/read_overlap.sh — the reading thread only reads: the page checks,
# checksums and hashing run on the scanner's check thread (engine/scan/scan_check.c), so the next
# read is in flight while a chunk is checked. A full backup of a small pgbench cluster at a
# pinned depth (no yielding pauses) has at least 90% of its chunks read while the chunk
# before them was being checked (--report adaptive_io.overlapped of .chunks; a build whose
# reading thread ran the checks itself overlapped 46% at scale 20: every file after an
# empty one, and every read the full buffers held back); at the adaptive defaults, the
# chunks not overlapped are the ones the controller held back with yielding pauses (its
# policy), at most 10% besides. The check thread's time and CPU are in the report and
# the log. Both backups restore to the source's contents. Fast: well under a minute.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source "${PB_SCALE:-5}"
pb_report_dir
pg_psql "$SRC" "CHECKPOINT" >/dev/null
DIGEST=$(pg_digest_all "$SRC")

backup() { # NAME ARGS...: a full backup with --report $OUT/NAME.json, log in $PB_WORK/NAME.log
    local name=$1
    shift
    if pb backup --type full --checkpoint fast --report "$OUT/$name.json" "$@" \
        >"$PB_WORK/$name.log" 2>&1; then
        pb_test_ok "full backup $name ($*)"
    else
        cat "$PB_WORK/$name.log" >&2
        pb_test_fail "full backup $name ($*) failed"
    fi
}
# overlap NAME: "overlapped paused chunks" from the report (requests when a build has no
# per-chunk count: one chunk a request at a pinned size)
overlap() {
    python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['adaptive_io']
print(a['overlapped'], a.get('paused_chunks', 0), a.get('chunks', a['requests']))" "$OUT/$1.json" 2>/dev/null
}

backup pinned --queue-depth 2 --read-size 256k
read -r OV PA CH <<<"$(overlap pinned)"
pb_log "pinned: $OV of $CH chunks read while the one before was checked"
if [ -n "$CH" ] && [ "$CH" -gt 0 ] && [ $((OV * 10)) -ge $((CH * 9)) ]; then
    pb_test_ok "pinned: $OV of $CH chunks ($((OV * 100 / CH))%) read while the one before was checked"
else
    pb_test_fail "pinned: only ${OV:-?} of ${CH:-?} chunks read while the one before was checked (want 90%)"
fi

backup adaptive
read -r OV PA CH <<<"$(overlap adaptive)"
pb_log "adaptive: $OV of $CH chunks overlapped, $PA held back by yielding pauses"
if [ -n "$CH" ] && [ "$CH" -gt 0 ] && [ $(((OV + PA) * 10)) -ge $((CH * 9)) ]; then
    pb_test_ok "adaptive: $OV of $CH chunks overlapped the checks, $PA more held back by pauses"
else
    pb_test_fail "adaptive: ${OV:-?} of ${CH:-?} chunks overlapped, ${PA:-?} held back by pauses (want 90% together)"
fi

STAGES=$(pb_json "$OUT/pinned.json" '["stages"]')
if python3 -c "
import json, sys
st = json.load(open(sys.argv[1]))['stages']
ok = st['check_seconds'] > 0 and st['check_cpu_seconds'] > 0 and \
     abs(st['page_work_seconds'] + st['queue_wait_seconds'] - st['check_seconds']) <= 0.05 * st['check_seconds'] + 0.01
sys.exit(0 if ok else 1)" "$OUT/pinned.json" 2>/dev/null; then
    pb_test_ok "the report has the check thread's time and CPU, page work and queue waits adding up to it"
else
    pb_test_fail "the report's stages lack the check thread's time: $STAGES"
fi
if grep -Eq "check thread [0-9.]+ s = page checks and hashing" "$PB_WORK/pinned.log" &&
    grep -Eq "checks: on the check thread [0-9.]+ s \(CPU [0-9.]+ s\) for [0-9]+ chunks" "$PB_WORK/pinned.log"; then
    pb_test_ok "the log states the check thread's share"
else
    pb_test_fail "no check-thread lines in $PB_WORK/pinned.log"
fi

# Both restore to the source's contents (the checks moved threads, not what is stored).
for name in pinned adaptive; do
    id=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['backup']['id'])" \
        "$OUT/$name.json" 2>/dev/null)
    DST=$PB_WORK/restore-$name
    if pb_restore_start "$DST" --set "$id" && [ "$(pg_digest_all "$DST")" = "$DIGEST" ]; then
        pb_test_ok "backup $name ($id) restores to the source's contents"
    else
        pb_test_fail "backup $name (${id:-no id}) does not restore to the source's contents"
    fi
    pg_stop "$DST"
done
pb_test_summary
