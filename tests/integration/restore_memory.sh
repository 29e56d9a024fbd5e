#!/bin/bash
# tests/integration/restore_memory.sh — a restore's memory is a fixed budget, not what
# the data makes its buffers grow to (engine/pack/pack.h, the source's budget).
# pgbench -s 5 (~75 MB) and a 40 MB table of hex text, a full and two incrementals; the
# chain is restored with --max-memory 24M (split into a 6 MiB pack cache, four workers'
# 3 MiB of frames and source floor, and a 6 MiB pool the sources share; before
# 2026-12-02 two workers of 9 MiB) and its peak RSS (--report peak_rss_bytes) must stay
# under RSS_BOUND_MIB (the budget plus the process's own ~16 MiB). A build without a
# restore budget refuses --max-memory for restore (its workers' buffers were bounded
# only by 4 slots x 9 MiB each; this small chain does not reach that, the unit test
# test_source_budget proves the budget itself). The bounded restore still starts and
# holds the source's contents; a --max-memory too small for one worker is refused,
# naming the bytes it needs. A rebase of the chain stays under REBASE_BOUND_MIB (29 MiB
# here; about 33 with a rebase pack source left at 16 MiB). Fast: about a minute.
source "$(dirname "$0")/pb_lib.sh"
RSS_BOUND_MIB=${RSS_BOUND_MIB:-44}
REBASE_BOUND_MIB=${REBASE_BOUND_MIB:-29}
pb_setup
pb_pgbench_source 5
q() { pg_psql "$SRC" "$1" >/dev/null; }
pb_report_dir

# ~40 MB of hex text (half compressible): packs long enough for 4 MiB read ranges
q "CREATE TABLE noise AS SELECT g, md5(random()::text) a, md5(random()::text) b,
   md5(random()::text) c FROM generate_series(1, 300000) g"
q "CHECKPOINT"
pb backup --type full --quiet >/dev/null 2>&1 || pb_test_fail "full backup"
for n in 1 2; do
    q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = $n"
    q "CHECKPOINT"
    pb backup --type incr --quiet >/dev/null 2>&1 || pb_test_fail "incremental $n"
done
LAST=$(pb_last_id)
DIGEST=$(pg_digest_all "$SRC")

if pb_restore_start "$PB_WORK/rs" --set "$LAST" --max-memory 24M --report "$OUT/rs.json"; then
    pb_test_ok "the chain restores with --max-memory 24M"
    pb_assert_eq "$(pg_digest_all "$PB_WORK/rs")" "$DIGEST" "the bounded restore holds the source's contents"
    pg_stop "$PB_WORK/rs"
else
    pb_test_fail "restore of the chain with --max-memory 24M"
fi
pb_check_rss "$OUT/rs.json" "$RSS_BOUND_MIB" "the restore with --max-memory 24M"

# For the record (no bound: the defaults' budget is larger than this small chain needs).
mkdir -p "$PB_WORK/dflt" && chmod 0700 "$PB_WORK/dflt" && _pb_chown_pg "$PB_WORK/dflt"
pb restore --target-dir "$PB_WORK/dflt" --set "$LAST" --report "$OUT/dflt.json" >/dev/null 2>&1 &&
    pb_log "restore with the defaults: peak RSS $(pb_json "$OUT/dflt.json" '["peak_rss_bytes"] // 1048576') MiB"

# A rebase rebuilds the chain through one pack source with the restore worker's budget
# (restore/rebase.c; RS_DEFAULT_SOURCE, 6 MiB): a build that left it at the 16 MiB
# default filled it on this chain's 64 MB table, read ahead up to 4 MiB per slot.
if pb rebase --set "$LAST" --report "$OUT/rb.json" >"$PB_WORK/rb.log" 2>&1; then
    pb_test_ok "the chain rebases"
else
    pb_test_fail "rebase of the chain: $(tail -n 3 "$PB_WORK/rb.log")"
fi
pb_check_rss "$OUT/rb.json" "$REBASE_BOUND_MIB" "the rebase"

mkdir -p "$PB_WORK/small" && chmod 0700 "$PB_WORK/small" && _pb_chown_pg "$PB_WORK/small"
if out=$(pb restore --target-dir "$PB_WORK/small" --set "$LAST" --max-memory 4M 2>&1); then
    pb_test_fail "a restore with --max-memory 4M was accepted"
else
    case $out in
    *"too small for a restore"*) pb_test_ok "--max-memory 4M is refused for a restore" ;;
    *) pb_test_fail "--max-memory 4M refused without the reason: $out" ;;
    esac
fi
pb_test_summary
