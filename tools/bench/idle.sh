#!/bin/bash
# tools/bench/idle.sh — a full backup's read rate on an idle database against dd O_DIRECT
# (512 KiB, 1 MiB, 2 MiB requests over the relation files over 1 MiB), and two pageback
# binaries side by side (OLD_BIN and PB_BIN, their order swapped every other round),
# caches dropped before each pass, ROUNDS rounds (default 3; this virtual disk's rate moves
# by 2x between passes, so each backup is compared with its own round's best dd). Prints a
# table per round (each binary's rate / that round's best dd) and the median over rounds,
# with what the read controller did (depth, request size, grows, plateaus, from each
# backup's report JSON), and writes it all to $BENCH_RESULTS/idle.json.
#   OLD_BIN=/path/to/old/pageback SCALE=60 PB_BIN=build/pageback tools/bench/idle.sh
# IDLE_PB_OPTS: extra options for both binaries' backups (e.g. "--queue-depth 1 --read-size
# 512k" pins the controller, to tell its probes from the rest of a change).
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
SCALE=${SCALE:-60}
ROUNDS=${ROUNDS:-3}
OLD=${OLD_BIN:?}
bench_setup idle
trap '_pb_rc=$?; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT
bench_pgbr_prepare
bench_cluster "$SCALE"
pb backup --type full >/dev/null 2>&1 || pb_die "first"
mapfile -t FILES < <(find "$SRC/base" -type f -size +1M | sort)
BYTES=$(cat "${FILES[@]}" | wc -c)
NEW=$PB_BIN
ROWS=$BENCH_TMP/idle-rows.tsv # round, what, MB/s, report JSON (or -)
: >"$ROWS"
for rep in $(seq 1 "$ROUNDS"); do
    for bs in 512K 1M 2M; do
        bench_drop_caches
        t0=$(date +%s.%N)
        for f in "${FILES[@]}"; do dd if="$f" of=/dev/null bs="$bs" iflag=direct status=none; done
        t1=$(date +%s.%N)
        rate=$(awk -v b="$BYTES" -v a="$t0" -v c="$t1" 'BEGIN {printf "%.0f", b / 1e6 / (c - a)}')
        echo "rep $rep dd_$bs $rate MB/s"
        printf '%s\tdd_%s\t%s\t-\t-\n' "$rep" "$bs" "$rate" >>"$ROWS"
    done
    # The order alternates by round: the second backup of a round runs while the host may
    # still be absorbing the first one's repository writes.
    order="old new"; [ $((rep % 2)) -eq 0 ] && order="new old"
    for which in $order; do
        [ $which = old ] && PB_BIN=$OLD || PB_BIN=$NEW
        json=$BENCH_TMP/report-$which-$rep.json
        bench_drop_caches
        # A binary older than the detail level refuses it (and logs its I/O lines at info).
        level=${PAGEBACK_LOG_LEVEL-}
        "$PB_BIN" info --log-level detail --help >/dev/null 2>&1 || unset PAGEBACK_LOG_LEVEL
        bench_pb backup --type full --report "$json" ${IDLE_PB_OPTS:-} || pb_die "backup failed"
        [ -n "$level" ] && export PAGEBACK_LOG_LEVEL=$level
        line=$(grep -o 'scanned .*' "$BENCH_TMP/pb.out" | head -1)
        echo "rep $rep pageback_$which $line cpu $T_CPU s rss $T_RSS_MIB wall $T_WALL s"
        grep -E "I/O:|I/O sizes:|stages:|CPU per GB" "$BENCH_TMP/pb.out" | sed "s/^/    $which: /" | cut -c1-300
        rate=$(sed -n 's/.*(\([0-9]*\) MB\/s).*/\1/p' <<<"$line")
        printf '%s\tpageback_%s\t%s\t%s\t%s\n' "$rep" "$which" "${rate:-0}" "$json" "$T_WALL" >>"$ROWS"
    done
done
python3 - "$ROWS" "$BENCH_RESULTS/idle.json" "$SCALE" "$BYTES" <<'PY'
import json, statistics, sys
rows, out, scale, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rounds = {}
for line in open(rows):
    rep, what, rate, rj, wall = line.rstrip("\n").split("\t")
    r = rounds.setdefault(int(rep), {"round": int(rep), "dd": {}, "pageback": {}})
    if what.startswith("dd_"):
        r["dd"][what[3:]] = int(rate)
        continue
    which = what[len("pageback_"):]
    io = {}
    try:
        io = json.load(open(rj)).get("adaptive_io") or {}
    except (OSError, ValueError):
        pass
    keys = ("depth_peak", "depth_final", "grows", "plateaus", "cuts", "yields",
            "size_grows", "size_plateaus", "request_bytes_peak", "request_bytes_final",
            "latency_floor_ms", "latency_floor_median_ms", "depth_gain_pct",
            "size_gain_pct", "decision")
    # The whole command: the relation files' bytes over the command's wall time (start,
    # checkpoint, connect, scan, stop, WAL wait, manifest commit, exit).
    whole = round(nbytes / 1e6 / float(wall)) if wall not in ("-", "") and float(wall) > 0 else 0
    r["pageback"][which] = {"mb_per_s": int(rate), "whole_mb_per_s": whole, "wall_s": wall,
                            "controller": {k: io.get(k) for k in keys}}
for r in rounds.values():
    best = max(r["dd"].items(), key=lambda kv: kv[1]) if r["dd"] else ("-", 0)
    r["dd_best"] = {"size": best[0], "mb_per_s": best[1]}
    for p in r["pageback"].values():
        p["ratio_to_round_best_dd"] = round(p["mb_per_s"] / best[1], 3) if best[1] else None
        p["whole_ratio_to_round_best_dd"] = round(p["whole_mb_per_s"] / best[1], 3) if best[1] else None
order = sorted(rounds)
whiches = sorted({w for r in rounds.values() for w in r["pageback"]})
median = {w: statistics.median([rounds[k]["pageback"][w]["ratio_to_round_best_dd"]
                                for k in order if w in rounds[k]["pageback"]])
          for w in whiches}
median_whole = {w: statistics.median([rounds[k]["pageback"][w]["whole_ratio_to_round_best_dd"]
                                      for k in order if w in rounds[k]["pageback"]])
                for w in whiches}
print("| round | dd 512K / 1M / 2M MB/s | best dd | " +
      " | ".join(f"{w} MB/s | {w} / best dd | {w} whole command MB/s (/ dd) | {w} depth, request KiB, grows/plateaus/size grows/size plateaus"
                 for w in whiches) + " |")
print("|---|---|---|" + "---|---|---|---|" * len(whiches))
def ctl(c):
    if c.get("depth_peak") is None:
        return "- (no report fields)"
    rb = c.get("request_bytes_peak")
    counts = "/".join("-" if c.get(k) is None else str(c[k])
                      for k in ("grows", "plateaus", "size_grows", "size_plateaus"))
    return (f"peak {c['depth_peak']} final {c['depth_final']}, "
            f"{rb // 1024 if rb else '-'} peak, {counts}")
for k in order:
    r = rounds[k]
    dd = " / ".join(str(r["dd"].get(s, "-")) for s in ("512K", "1M", "2M"))
    cells = []
    for w in whiches:
        p = r["pageback"].get(w)
        cells += [str(p["mb_per_s"]), f"{p['ratio_to_round_best_dd']:.2f}x",
                  f"{p['whole_mb_per_s']} ({p['whole_ratio_to_round_best_dd']:.2f}x)",
                  ctl(p["controller"])] if p else ["-"] * 4
    print(f"| {k} | {dd} | {r['dd_best']['mb_per_s']} ({r['dd_best']['size']}) | " + " | ".join(cells) + " |")
print("median of rounds, rate / that round's best dd: " +
      ", ".join(f"{w} {median[w]:.2f}x" for w in whiches) +
      "; whole command / best dd: " + ", ".join(f"{w} {median_whole[w]:.2f}x" for w in whiches))
json.dump({"benchmark": "idle", "scale": scale, "bytes_read_by_dd": nbytes,
           "rounds": [rounds[k] for k in order],
           "median_ratio_to_round_best_dd": median,
           "median_whole_ratio_to_round_best_dd": median_whole}, open(out, "w"), indent=1)
print("results:", out)
PY
