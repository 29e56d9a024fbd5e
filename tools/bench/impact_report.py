#!/usr/bin/env python3
"""tools/bench/impact_report.py — tables, JSON and the per-second p99 series of
tools/bench/impact.sh (see its head comment for what is measured)."""
import glob
import json
import sys


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def load_latencies(logdir):
    """(epoch seconds, latency ms) of every transaction in pgbench's -l logs."""
    lat = []
    for f in glob.glob(logdir + "/lat.*"):
        for line in open(f):
            p = line.split()
            if len(p) >= 6:
                lat.append((int(p[4]) + int(p[5]) / 1e6, int(p[2]) / 1000.0))
    return sorted(lat)


def main():
    logdir, wfile, ifile, out, dat, window, scale, cg, data = sys.argv[1:10]
    lat = load_latencies(logdir)
    wins = []
    for line in open(wfile):
        name, t0, t1, rbytes, runs = line.split()
        t0, t1 = float(t0), float(t1)
        w = [l for ts, l in lat if t0 <= ts < t1]
        wins.append({"window": name, "t0": t0, "t1": t1, "tx": len(w),
                     "p50_ms": pct(w, 0.5), "p99_ms": pct(w, 0.99),
                     "device_read_MBps": int(rbytes) / 1e6 / (t1 - t0), "runs": int(runs)})
    idle_rate = wins[0]["device_read_MBps"] if wins else 0
    rows, prev_idle = [], wins[0] if wins else None
    for w in wins:
        if w["runs"] == 0:
            prev_idle = w
            continue
        after = next((x for x in wins if x["window"] == "after_" + w["window"]), None)
        rows.append({"tool": w["window"], "runs": w["runs"],
                     "p50_before_ms": prev_idle["p50_ms"], "p99_before_ms": prev_idle["p99_ms"],
                     "p50_during_ms": w["p50_ms"], "p99_during_ms": w["p99_ms"],
                     "p99_after_ms": after["p99_ms"] if after else None,
                     "p99_ratio": w["p99_ms"] / prev_idle["p99_ms"] if prev_idle["p99_ms"] else None,
                     "tool_read_MBps": max(0.0, w["device_read_MBps"] - idle_rate)})
    # The read rate under load against dd O_DIRECT's in the same run (the physical
    # reference: 512 KiB, one in flight, no pause, no I/O priority).
    dd_row = next((r for r in rows if r["tool"] == "dd_direct"), None)
    for r in rows:
        ref = dd_row["tool_read_MBps"] if dd_row else 0
        r["read_vs_dd"] = r["tool_read_MBps"] / ref if ref else None
    print(f"Scenario 1: point selects at a fixed rate, PostgreSQL in a {cg} MiB memory cgroup, "
          f"{data} MiB of relation files (scale {scale}), windows of {window} s")
    print("| tool | runs | p50 before / during ms | p99 before / during / after ms | "
          "p99 during / before | tool read MB/s | read / dd |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['tool']} | {r['runs']} | {r['p50_before_ms']:.2f} / {r['p50_during_ms']:.2f} | "
              f"{r['p99_before_ms']:.2f} / {r['p99_during_ms']:.2f} / "
              f"{(r['p99_after_ms'] or float('nan')):.2f} | {(r['p99_ratio'] or float('nan')):.2f}x | "
              f"{r['tool_read_MBps']:.0f} | "
              + (f"{r['read_vs_dd']:.2f}x |" if r["read_vs_dd"] is not None else "- |"))
    idle, dd, hot, control, idle_runs = {}, [], None, None, []
    for line in open(ifile):
        p = line.split()
        if p[0].startswith("dd_"):
            mb = int(p[3]) / 1e6
            dd.append({"request": p[0][3:], "MBps": mb / (float(p[2]) - float(p[1]))})
        elif p[0] == "pageback" and len(p) >= 5:
            mib, secs = float(p[1]), float(p[2])
            idle_runs.append(mib * 1.048576 / secs if secs else 0)
            if idle and idle["MBps"] >= idle_runs[-1]:
                continue  # the best run of the alternation counts, as for dd
            idle = {"MiB": mib, "scan_s": secs, "MBps": mib * 1.048576 / secs if secs else 0,
                    "cpu_s": float(p[3]), "cpu_s_per_GB": float(p[3]) / (mib * 1.048576 / 1e3),
                    "peak_rss_MiB": float(p[4])}
        elif p[0] == "hot_control":
            control = {"resident_before_pct": float(p[1]), "resident_after_pct": float(p[2])}
        elif p[0] == "hot":
            hot = {"resident_before_pct": float(p[1]), "resident_after_pct": float(p[2])}
    by_size = {}
    for d in dd:  # the best pass of each request size
        if d["request"] not in by_size or d["MBps"] > by_size[d["request"]]["MBps"]:
            by_size[d["request"]] = d
    dd_runs = dd
    dd = list(by_size.values())
    best = max(dd, key=lambda d: d["MBps"]) if dd else None
    print("\nScenario 2: idle database, read rate over the same relation files")
    print("| reader | MB/s | vs best dd |")
    print("|---|---|---|")
    for d in dd:
        print(f"| dd iflag=direct bs={d['request']} | {d['MBps']:.0f} | {d['MBps'] / best['MBps']:.2f} |")
    if idle and best:
        idle["vs_best_dd"] = idle["MBps"] / best["MBps"]
        idle["runs_MBps"] = idle_runs
        print(f"| pageback full (adaptive) | {idle['MBps']:.0f} | {idle['vs_best_dd']:.2f} |")
        print(f"best of {len(idle_runs)} alternated passes each; pageback passes "
              + ", ".join(f"{r:.0f}" for r in idle_runs) + " MB/s")
        print(f"CPU {idle['cpu_s_per_GB']:.2f} s per GB, peak RSS {idle['peak_rss_MiB']:.0f} MiB")
    if hot:
        print("\nScenario 3: idle hot table in the cache, through a pageback full backup")
        print(f"resident before {hot['resident_before_pct']:.1f}%, after "
              f"{hot['resident_after_pct']:.1f}%")
        if control:
            hot["control"] = control
            print(f"control, 10 s without a backup: {control['resident_before_pct']:.1f}% -> "
                  f"{control['resident_after_pct']:.1f}%")
    # Per-second p99 of each tool window, time from the window's start.
    with open(dat, "w") as f:
        for w in wins:
            if w["runs"] == 0 and w["window"] != "idle":
                continue
            f.write(f"# {w['window']}\n")
            sec = {}
            for ts, l in lat:
                if w["t0"] <= ts < w["t1"]:
                    sec.setdefault(int(ts - w["t0"]), []).append(l)
            for s in sorted(sec):
                f.write(f"{s} {pct(sec[s], 0.99):.3f}\n")
            f.write("\n\n")
    names = [w["window"] for w in wins if w["runs"] > 0 or w["window"] == "idle"]
    with open(dat + ".gp", "w") as f:
        f.write("plot " + ", ".join(f"'{dat}' index {i} using 1:2 with lines title '{n}'"
                                    for i, n in enumerate(names)) + "\n")
    json.dump({"benchmark": "impact", "scale": int(scale), "window_s": int(window),
               "cgroup_mib": int(cg), "data_mib": int(data), "windows": wins,
               "under_load": rows, "idle": idle, "dd": dd, "dd_runs": dd_runs,
               "hot_table": hot},
              open(out, "w"), indent=1)


main()
