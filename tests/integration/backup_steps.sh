#!/bin/bash
# tests/integration/backup_steps.sh — a backup's fixed costs are shown: the log has one
# "steps:" line (connect, plan, start (checkpoint), prepare, walk, scan, stop, WAL wait,
# manifest commit, exit) and --report's "stages" object the same fields, which add up to
# the backup's total; for a full and for an incremental after a small change; a full's
# preparation does not wait for the server's next second. Fast.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source 1
pb_report_dir
STEPS="connect plan start prepare walk stop wal_wait commit exit total"

backup() { # NAME ARGS...
    local name=$1
    shift
    if pb backup --checkpoint fast --report "$OUT/$name.json" "$@" >"$PB_WORK/$name.log" 2>&1; then
        pb_test_ok "backup $name ($*)"
    else
        cat "$PB_WORK/$name.log" >&2
        pb_test_fail "backup $name ($*) failed"
    fi
}
check_steps() { # NAME
    local name=$1 why
    # every step present and >= 0; the steps (the walk is inside scan_seconds) add up to
    # the total within 5% (the clocks are read apart, and a few calls sit between steps)
    why=$(python3 -c "
import json, sys
st = json.load(open(sys.argv[1]))['stages']
keys = [k + '_seconds' for k in sys.argv[2].split()]
missing = [k for k in keys if k not in st or st[k] < 0]
if missing:
    print('missing or negative:', missing); sys.exit(1)
parts = sum(st[k] for k in keys if k not in ('walk_seconds', 'total_seconds')) + st['scan_seconds']
if st['total_seconds'] <= 0 or abs(parts - st['total_seconds']) > 0.05 * st['total_seconds'] + 0.05:
    print('steps add up to %.3f s, total %.3f s' % (parts, st['total_seconds'])); sys.exit(1)
" "$OUT/$name.json" "$STEPS" 2>&1)
    if [ $? -eq 0 ]; then
        pb_test_ok "$name: the report's stages hold every step, adding up to the total"
    else
        pb_test_fail "$name: $why"
    fi
    if grep -Eq "steps: connect [0-9.]+ s, plan [0-9.]+ s, start \(checkpoint\) [0-9.]+ s, prepare [0-9.]+ s, walk [0-9.]+ s, scan [0-9.]+ s, stop [0-9.]+ s, WAL wait [0-9.]+ s, manifest commit [0-9.]+ s, exit [0-9.]+ s; [0-9.]+ s in all" "$PB_WORK/$name.log"; then
        pb_test_ok "$name: the log has the steps line"
    else
        pb_test_fail "$name: no steps line in $PB_WORK/$name.log"
    fi
}

backup full --type full
check_steps full
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 100" >/dev/null
backup incr --type incr
check_steps incr
# The file-skip horizon is one reading of the server's clock, no wait for its next second:
# three fulls spend well under 0.3 s preparing in all (a wait for the next second would
# spend 1.5 s on average, each at a random point of its second).
backup full2 --type full
backup full3 --type full
prep=$(python3 -c "
import json, sys
print('%.3f' % sum(json.load(open(f))['stages']['prepare_seconds'] for f in sys.argv[1:]))
" "$OUT/full.json" "$OUT/full2.json" "$OUT/full3.json")
pb_check "three fulls prepared in $prep s in all (< 0.3 s: no wait for the server's next second)" \
    python3 -c "import sys; sys.exit(0 if float('$prep') < 0.3 else 1)"
pb_test_summary
