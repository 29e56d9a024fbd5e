#!/bin/bash
# tools/bench/rss.sh — peak RSS of every pageback command at two database sizes (memory
# must not grow with the database). For each of SCALE1 and SCALE2 (pgbench scales,
# default 100 and 1000): a fresh cluster, then, each under /usr/bin/time (%M, as the
# postgres user): full backup, 1% update of pgbench_accounts and an incremental backup,
# restore of that incremental, verify, rebase (synthetic full), expire --retain-full 1,
# info. Prints one table (RSS in MiB per command and scale, and SCALE2 / SCALE1); the
# issue's target is every ratio within 1.1. Records go to BENCH_RESULTS/rss.jsonl.
#
#   tools/bench/rss.sh                          # scales 100 and 1000 (the lead's run)
#   SCALE1=1 SCALE2=2 tools/bench/rss.sh        # smoke run
# Each scale runs in a child invocation (RSS_ONE=<scale>) with a work directory of its
# own, removed at the end (PB_KEEP=1 keeps it).
set -u
SCALE1=${SCALE1:-100}
SCALE2=${SCALE2:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)

if [ -z "${RSS_ONE:-}" ]; then
    # One run at a time on a machine: a scale-1000 run needs ~35 GB under /tmp, and two at
    # once fill the disk under every cluster on it.
    exec 9>/tmp/pageback-rss.lock
    flock -n 9 || { echo "rss.sh: another rss.sh runs; waiting for it" >&2; flock 9; }
    out=$(mktemp)
    for s in "$SCALE1" "$SCALE2"; do
        RSS_ONE=$s RSS_OUT=$out bash "$HERE/rss.sh" || { echo "rss.sh: scale $s failed" >&2; exit 1; }
    done
    /usr/bin/python3 - "$out" "$SCALE1" "$SCALE2" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    scale, cmd, rss = line.split()
    rows.setdefault(cmd, {})[scale] = float(rss)
a, b = sys.argv[2], sys.argv[3]
print("%-12s %12s %12s %8s" % ("command", "scale " + a, "scale " + b, "ratio"))
worst = 0.0
for cmd, r in rows.items():
    ratio = r[b] / r[a] if r.get(a) else float("nan")
    worst = max(worst, ratio)
    print("%-12s %10.1f M %10.1f M %8.2f" % (cmd, r.get(a, 0), r.get(b, 0), ratio))
print("largest ratio %.2f (target <= 1.10)" % worst)
PY
    mkdir -p "${BENCH_RESULTS:-$HERE/results}"
    cp "$out" "${BENCH_RESULTS:-$HERE/results}/rss.txt"
    rm -f "$out"
    exit 0
fi

source "$HERE/lib.sh"
SCALE=$RSS_ONE
bench_setup "rss-$SCALE"
bench_pgbr_prepare # bench_cluster archives to both tools (lib.sh); only pageback is measured
bench_cluster "$SCALE" "autovacuum = off"
record() { # CMD: the RSS of the last bench_pb
    echo "$SCALE $1 $T_RSS_MIB" >>"$RSS_OUT"
    bench_rec kind=rss scale="$SCALE" command="$1" rss_mib="$T_RSS_MIB" wall_s="$T_WALL"
    pb_log "scale $SCALE: $1: peak RSS $T_RSS_MIB MiB, ${T_WALL}s"
}
pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_wait_archived "$SRC"
bench_pb backup --type full --pgdata "$SRC" || pb_die "full backup failed"
record full
rows=$((SCALE * 100000 / 100))
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= $rows" \
    >/dev/null || pb_die "update failed"
pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_pb backup --type incr --pgdata "$SRC" || pb_die "incremental backup failed"
record incremental
LAST=$(pb_last_id)
mkdir -p "$PB_WORK/restored" && _pb_chown_pg "$PB_WORK/restored"
bench_pb restore --target-dir "$PB_WORK/restored" --set "$LAST" || pb_die "restore failed"
record restore
rm -rf "$PB_WORK/restored"
bench_pb verify || pb_die "verify failed"
record verify
bench_pb rebase || pb_die "rebase failed"
record rebase
bench_pb expire --retain-full 1 || pb_die "expire failed"
record expire
bench_pb info || pb_die "info failed"
record info
bench_rec kind=meta_end loadavg_end="$(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$BENCH_RESULTS"
cp "$BENCH_REC" "$BENCH_RESULTS/rss-$SCALE.jsonl"
