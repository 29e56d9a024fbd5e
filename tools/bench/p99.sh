#!/bin/bash
# tools/bench/p99.sh — query latency while a backup runs, side by side in one run.
# A rate-limited point-select load (pgbench -S -R RATE) runs throughout; windows of
# WINDOW seconds: idle baseline, pageback full backups back to back, idle again,
# pg_basebackup -Fp back to back. p50/p99 of each window from pgbench's per-
# transaction log; ratios to the baseline. Caches are dropped before each window so
# the backups really read the disk.
#   BENCH_SCALE (default 50)  BENCH_RATE (default 400 tps)  BENCH_WINDOW (default 20 s)
#   BENCH_PB_ARGS  extra backup options (e.g. "--queue-depth 2 --max-rate 200M")
set -u -o pipefail
cd "$(dirname "$0")/../.."
source tests/integration/pb_lib.sh
SCALE=${BENCH_SCALE:-50}
RATE=${BENCH_RATE:-400}
WINDOW=${BENCH_WINDOW:-20}
OUT=tools/bench/results/p99.json
mkdir -p tools/bench/results
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" "$SCALE" || pb_die "pgbench -i failed"
pg_psql "$SRC" "CHECKPOINT" >/dev/null
LOGDIR=$PB_WORK/lat
mkdir -p "$LOGDIR" && _pb_chown_pg "$LOGDIR"
TOTAL=$((WINDOW * 4 + 10))
# Per-transaction log: client_id tx_no time_us script_no epoch_s epoch_us
(cd "$LOGDIR" && "$PB_PGBIN/pgbench" -n -S -c 2 -j 2 -R "$RATE" -T "$TOTAL" -l \
    --log-prefix=lat -h "$PGHOST" -p "$PGPORT" -U postgres postgres >"$LOGDIR/pgbench.out" 2>&1) &
LOAD=$!
sleep 3
mark() { date +%s.%N; }
busy_loop() { # run "$@" repeatedly until the window ends
    local end=$(( $(date +%s) + WINDOW ))
    while [ "$(date +%s)" -lt "$end" ]; do "$@" >/dev/null 2>&1 || true; done
}
pbb_dir=$PB_WORK/bb
basebackup() {
    rm -rf "$pbb_dir"
    "$PB_PGBIN/pg_basebackup" -h "$PGHOST" -p "$PGPORT" -U postgres -D "$pbb_dir" -Fp -X none -c fast
}
sync; echo 3 >/proc/sys/vm/drop_caches
T0=$(mark); sleep "$WINDOW"; T1=$(mark)
sync; echo 3 >/proc/sys/vm/drop_caches
busy_loop pb backup --type full ${BENCH_PB_ARGS:-}; T2=$(mark)
sync; echo 3 >/proc/sys/vm/drop_caches
sleep "$WINDOW"; T3=$(mark)
sync; echo 3 >/proc/sys/vm/drop_caches
busy_loop basebackup; T4=$(mark)
wait "$LOAD"
/usr/bin/python3 - "$LOGDIR" "$OUT" "$T0" "$T1" "$T2" "$T3" "$T4" <<'PY'
import glob, json, sys
logdir, out = sys.argv[1], sys.argv[2]
t = [float(x) for x in sys.argv[3:]]
lat = []
for f in glob.glob(logdir + "/lat.*"):
    for line in open(f):
        p = line.split()
        if len(p) >= 6:
            lat.append((int(p[4]) + int(p[5]) / 1e6, int(p[2]) / 1000.0))
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
names = ["idle (baseline)", "pageback full backups", "idle again", "pg_basebackup -Fp"]
rows = []
for i, n in enumerate(names):
    w = [l for ts, l in lat if t[i] <= ts < t[i + 1]]
    rows.append({"window": n, "tx": len(w), "p50_ms": pct(w, 0.5), "p99_ms": pct(w, 0.99)})
base = rows[0]["p99_ms"]
print("| window | transactions | p50 ms | p99 ms | p99 vs baseline |")
print("|---|---|---|---|---|")
for r in rows:
    r["p99_ratio"] = r["p99_ms"] / base if base else None
    print(f"| {r['window']} | {r['tx']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['p99_ratio']:.2f} |")
json.dump({"benchmark": "p99", "rows": rows}, open(out, "w"), indent=1)
print("results:", out)
PY
