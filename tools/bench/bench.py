#!/usr/bin/python3
"""tools/bench/bench.py — the Python half of pageback's benchmarks.

Subcommands (the bash scripts in this folder call them):

  rec FILE key=value...        append one measurement (a JSON object) to FILE;
                               values that parse as numbers are stored as numbers
  pagehash PGDATA OUT [--prev PREV] [--changed-out PATH]
                               hash every 8 kB page of the relation files under
                               base/ and global/ (stdlib blake2b, 8 bytes) into OUT;
                               with --prev, print JSON: pages now, pages that differ
                               from PREV (content changed, or new), files; with
                               --changed-out, write those pages' bytes there
  fio-json FILE                print "io_bytes runtime_s bw_bytes_per_s" of a fio job
  pgbr-info JSON LABEL         print "size_bytes repo_size_bytes repo_delta_bytes
                               delta_bytes start stop" of a pgBackRest backup
  info-field JSON ID FIELD...  fields of one backup from `pageback info --json`
  report KIND RECORDS OUT      medians, ratios and a table for KIND (full, incr,
                               restore, cache); writes OUT (JSON) and prints the table
  show RESULTS.json            print the table of a results file again
  rereport IN.json OUT.json    recompute the summary of a results file (prints the table)

Everything reported is a median over repetitions: the machine is shared and noisy,
so the scripts alternate tools within each repetition and compare ratios.
"""
import hashlib
import json
import os
import pickle
import re
import statistics
import sys
import time

PAGE = 8192
REL_RE = re.compile(r"^\d+(_(fsm|vm|init))?(\.\d+)?$")
MIB = 1024.0 * 1024.0


def _num(v):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    if v in ("true", "false"):
        return v == "true"
    return v


def cmd_rec(args):
    path, pairs = args[0], args[1:]
    obj = {}
    for p in pairs:
        k, _, v = p.partition("=")
        obj[k] = _num(v)
    with open(path, "a") as f:
        f.write(json.dumps(obj, sort_keys=True) + "\n")


def _relation_files(pgdata):
    """Relation files of base/ and global/ (page-diffed by pageback), sorted."""
    out = []
    for top in ("base", "global"):
        root = os.path.join(pgdata, top)
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if REL_RE.match(name):
                    out.append(os.path.relpath(os.path.join(dirpath, name), pgdata))
    return sorted(out)


def cmd_pagehash(args):
    pgdata, out = args[0], args[1]
    prev_path = changed_out = None
    rest = args[2:]
    while rest:
        if rest[0] == "--prev":
            prev_path, rest = rest[1], rest[2:]
        elif rest[0] == "--changed-out":
            changed_out, rest = rest[1], rest[2:]
        else:
            sys.exit("pagehash: unknown argument " + rest[0])
    prev = None
    if prev_path:
        with open(prev_path, "rb") as f:
            prev = pickle.load(f)
    cf = open(changed_out, "wb") if changed_out else None
    hashes = {}
    pages = changed = new = files_changed = 0
    for rel in _relation_files(pgdata):
        hs = []
        try:
            with open(os.path.join(pgdata, rel), "rb", buffering=0) as f:
                while True:
                    buf = f.read(PAGE * 128)
                    if not buf:
                        break
                    for off in range(0, len(buf), PAGE):
                        page = buf[off:off + PAGE]
                        hs.append(hashlib.blake2b(page, digest_size=8).digest())
        except FileNotFoundError:  # dropped while we walked
            continue
        hashes[rel] = hs
        pages += len(hs)
        if prev is None:
            continue
        old = prev.get(rel, [])
        diff = [i for i, h in enumerate(hs) if i >= len(old) or old[i] != h]
        changed += len(diff)
        new += sum(1 for i in diff if i >= len(old))
        files_changed += 1 if diff else 0
        if cf and diff:
            with open(os.path.join(pgdata, rel), "rb") as f:
                for i in diff:
                    f.seek(i * PAGE)
                    cf.write(f.read(PAGE))
    if cf:
        cf.close()
    with open(out, "wb") as f:
        pickle.dump(hashes, f)
    if prev is not None:
        print(json.dumps({"pages": pages, "pages_differ": changed, "pages_new": new,
                          "files_changed": files_changed, "files": len(hashes)}))


def cmd_fio_json(args):
    with open(args[0]) as f:
        text = f.read()
    # fio may print warnings before the JSON document.
    d = json.loads(text[text.index("{"):])
    r = d["jobs"][0]["read"]
    print(r["io_bytes"], r["runtime"] / 1000.0, r["bw_bytes"])


def cmd_pgbr_info(args):
    with open(args[0]) as f:
        d = json.load(f)
    for st in d:
        for b in st.get("backup", []):
            if b["label"] == args[1]:
                i = b["info"]
                print(i["size"], i["repository"]["size"], i["repository"]["delta"],
                      i["delta"], b["timestamp"]["start"], b["timestamp"]["stop"])
                return
    sys.exit("pgbr-info: no backup " + args[1])


def cmd_info_field(args):
    with open(args[0]) as f:
        d = json.load(f)
    for b in d["backups"]:
        if b["id"] == args[1]:
            print(" ".join(str(b[k]) for k in args[2:]))
            return
    sys.exit("info-field: no backup " + args[1])


# ------------------------------------------------------------------ reports

def _load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _med(rows, key):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def _fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def _table(headers, rows):
    cols = [headers] + [[_fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]
    w = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    lines = ["| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(headers)) + " |",
             "|" + "|".join("-" * (x + 2) for x in w) + "|"]
    for r in cols[1:]:
        lines.append("| " + " | ".join(c.rjust(w[i]) if i else c.ljust(w[i])
                                       for i, c in enumerate(r)) + " |")
    return "\n".join(lines)


def _meta(recs):
    return next((r for r in recs if r.get("kind") == "meta"), {})


def report_full(recs):
    runs = [r for r in recs if r.get("kind") == "run"]
    tools = []
    for r in runs:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    summary = {}
    for t in tools:
        rows = [r for r in runs if r["tool"] == t]
        s = {"reps": len(rows)}
        for k in ("wall_s", "inner_s", "mib_s_wall", "mib_s_inner", "cpu_s", "rss_mib",
                  "read_mib", "stored_mib", "cached_mib", "cached_pct"):
            s[k] = _med(rows, k)
        s["values"] = {k: [r.get(k) for r in rows] for k in ("wall_s", "mib_s_wall")}
        summary[t] = s
    raw = summary.get("fio O_DIRECT", {}).get("mib_s_inner")
    pb = summary.get("pageback", {})
    ratios = {}
    if raw and pb.get("mib_s_inner"):
        ratios["pageback_inner_vs_raw"] = pb["mib_s_inner"] / raw
    if raw and pb.get("mib_s_wall"):
        ratios["pageback_wall_vs_raw"] = pb["mib_s_wall"] / raw
    for t in ("pg_basebackup", "pgbackrest"):
        if pb.get("wall_s") and summary.get(t, {}).get("wall_s"):
            ratios[f"pageback_wall_vs_{t}"] = pb["wall_s"] / summary[t]["wall_s"]
    # sweep.sh: "pageback 1024k qd8" against "fio 1024k qd8" (own timers).
    for t in tools:
        if t.startswith("pageback ") and "fio " + t[9:] in summary:
            f = summary["fio " + t[9:]].get("mib_s_inner")
            if f and summary[t].get("mib_s_inner"):
                ratios[f"{t} / fio {t[9:]}"] = summary[t]["mib_s_inner"] / f
    headers = ["tool", "reps", "wall s", "MiB/s (wall)", "MiB/s (own timer)", "CPU s",
               "peak RSS MiB", "read MiB", "stored MiB", "PGDATA cached MiB", "cached %"]
    rows = [[t, s["reps"], s["wall_s"], s["mib_s_wall"], s["mib_s_inner"], s["cpu_s"],
             s["rss_mib"], s["read_mib"], s["stored_mib"], s["cached_mib"], s["cached_pct"]]
            for t, s in summary.items()]
    text = _table(headers, rows)
    text += "\n\nratios (of medians): " + ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items())
    return {"tools": summary, "ratios": ratios}, text


def report_incr(recs):
    runs = [r for r in recs if r.get("kind") == "incr"]
    fulls = [r for r in recs if r.get("kind") == "full"]
    raws = [r for r in recs if r.get("kind") == "raw"]
    fracs = sorted({r["pct"] for r in runs})
    out = {"fractions": {}, "full": {}, "raw": {}}
    for t in sorted({r["tool"] for r in fulls}):
        rows = [r for r in fulls if r["tool"] == t]
        out["full"][t] = {k: _med(rows, k) for k in ("wall_s", "stored_bytes")}
    out["raw"] = {k: _med(raws, k) for k in ("wall_s", "fio_s", "mib_s")}
    out["raw"]["reads"] = len(raws)
    headers = ["rows updated", "tool", "reps", "pages really changed", "pages shipped",
               "stored KiB", "manifest KiB", "total KiB", "B/changed page", "wall s",
               "own timer s", "wall vs full", "wall vs raw read"]
    rows = []
    for p in fracs:
        fr = {}
        for t in ("pageback", "pgbackrest"):
            rs = [r for r in runs if r["pct"] == p and r["tool"] == t]
            if not rs:
                continue
            s = {k: _med(rs, k) for k in ("rows", "pages_differ", "pages_changed",
                                          "pages_scanned", "stored_bytes", "manifest_bytes",
                                          "total_bytes", "wall_s", "zstd_changed_bytes",
                                          "bytes_per_changed_page", "inner_s",
                                          "missed_pages")}
            s["reps"] = len(rs)
            s["values"] = {k: [r.get(k) for r in rs] for k in ("pages_differ",
                                                                "pages_changed", "total_bytes",
                                                                "wall_s")}
            full_wall = out["full"].get(t, {}).get("wall_s")
            s["wall_vs_full"] = s["wall_s"] / full_wall if full_wall and s["wall_s"] else None
            # Against the raw read of the same round when there is one (median of the
            # per-round ratios), else against the one before the full backups.
            per_round = []
            for r in rs:
                raw_r = [x["fio_s"] for x in raws if x.get("pct") == p and x.get("rep") == r["rep"]]
                if raw_r and raw_r[0]:
                    per_round.append(r["wall_s"] / raw_r[0])
            raw = out["raw"].get("fio_s")
            s["wall_vs_raw"] = (statistics.median(per_round) if per_round else
                                s["wall_s"] / raw if raw and s["wall_s"] else None)
            s["raw_fio_s"] = _med([x for x in raws if x.get("pct") == p], "fio_s")
            fr[t] = s
            kib = lambda b: b / 1024.0 if b is not None else None  # noqa: E731
            rows.append([f"{p}% ({_fmt(int(s['rows']))})", t, s["reps"], s["pages_differ"],
                         s["pages_changed"] if t == "pageback" else "-",
                         kib(s["stored_bytes"]), kib(s["manifest_bytes"]),
                         kib(s["total_bytes"]), s["bytes_per_changed_page"], s["wall_s"],
                         s["inner_s"], s["wall_vs_full"], s["wall_vs_raw"]])
        if "pageback" in fr and "pgbackrest" in fr and fr["pgbackrest"]["total_bytes"]:
            fr["stored_ratio_pageback_vs_pgbackrest"] = (fr["pageback"]["total_bytes"] /
                                                         fr["pgbackrest"]["total_bytes"])
        z = fr.get("pageback", {}).get("zstd_changed_bytes")
        if z and fr.get("pageback", {}).get("total_bytes"):
            fr["pageback_total_vs_zstd1_of_changed_pages"] = fr["pageback"]["total_bytes"] / z
            fr["pageback_packs_vs_zstd1_of_changed_pages"] = fr["pageback"]["stored_bytes"] / z
        out["fractions"][str(p)] = fr
    text = _table(headers, rows)
    text += "\n\nfull backups (median wall s): " + ", ".join(
        f"{t} {_fmt(v['wall_s'], 2)} s ({_fmt((v['stored_bytes'] or 0) / MIB)} MiB)"
        for t, v in out["full"].items())
    if out["raw"].get("fio_s"):
        text += (f"; raw O_DIRECT read of the relation files (fio, median of "
                 f"{out['raw']['reads']}) {_fmt(out['raw']['fio_s'], 2)} s"
                 f" ({_fmt(out['raw']['mib_s'])} MiB/s)")
    for p, fr in out["fractions"].items():
        bits = []
        if "stored_ratio_pageback_vs_pgbackrest" in fr:
            bits.append(f"pageback/pgBackRest stored = {fr['stored_ratio_pageback_vs_pgbackrest']:.3f}")
        if "pageback_total_vs_zstd1_of_changed_pages" in fr:
            bits.append("pageback packs / zstd -1 of the changed pages = "
                        f"{fr['pageback_packs_vs_zstd1_of_changed_pages']:.3f}, with the "
                        f"manifest {fr['pageback_total_vs_zstd1_of_changed_pages']:.2f}")
        if bits:
            text += f"\n{p}%: " + "; ".join(bits)
    return out, text


def report_restore(recs):
    runs = [r for r in recs if r.get("kind") == "restore"]
    backups = [r for r in recs if r.get("kind") == "backup"]
    out = {"restore": {}, "backups": {}}
    rows = []
    for what in ("full", "chain", "pgbackrest"):
        rs = [r for r in runs if r["what"] == what]
        if not rs:
            continue
        s = {k: _med(rs, k) for k in ("wall_s", "sync_s", "total_s", "cpu_s", "rss_mib",
                                     "chain_length", "restored_mib", "requests",
                                     "ranged_gets", "heads")}
        s["reps"] = len(rs)
        s["values"] = [r.get("total_s") for r in rs]
        out["restore"][what] = s
        mibs = s["restored_mib"] / s["total_s"] if s["restored_mib"] and s["total_s"] else None
        label = {"full": "pageback full", "chain": "pageback full + incrementals",
                 "pgbackrest": "pgBackRest 2.45 full"}[what]
        rows.append([label, int(s["chain_length"] or 0), s["reps"], s["wall_s"], s["sync_s"],
                     s["total_s"], mibs, s["cpu_s"], s["rss_mib"]])
    f, c = out["restore"].get("full"), out["restore"].get("chain")
    if f and c and f["total_s"]:
        out["ratio_chain_vs_full"] = c["total_s"] / f["total_s"]
        out["ratio_chain_vs_full_command_only"] = c["wall_s"] / f["wall_s"]
        # The same ratio within each repetition (both restores ran back to back).
        per = []
        for rep in sorted({r["rep"] for r in runs}):
            fr = [r["total_s"] for r in runs if r["rep"] == rep and r["what"] == "full"]
            cr = [r["total_s"] for r in runs if r["rep"] == rep and r["what"] == "chain"]
            if fr and cr and fr[0]:
                per.append(round(cr[0] / fr[0], 3))
        out["ratio_chain_vs_full_per_rep"] = per
    incr = [b for b in backups if b.get("type") == "incr"]
    out["backups"] = {"incrementals": len(incr),
                      "incr_wall_s_median": _med(incr, "wall_s"),
                      "incr_pages_changed_median": _med(incr, "pages_changed"),
                      "incr_stored_bytes_median": _med(incr, "stored_bytes")}
    def total(key):
        return sum(b[key] for b in incr if isinstance(b.get(key), (int, float)))
    changed, stored = total("pages_changed"), total("stored_bytes")
    if changed:
        out["backups"]["incr_bytes_per_changed_page"] = stored / changed
    text = _table(["restore of", "backups in chain", "reps", "command s", "sync s",
                   "total s", "MiB/s", "CPU s", "peak RSS MiB"], rows)
    if "ratio_chain_vs_full" in out:
        text += (f"\n\nchain/full restore time: {out['ratio_chain_vs_full']:.2f} (with sync), "
                 f"{out['ratio_chain_vs_full_command_only']:.2f} (command only); per repetition: "
                 + ", ".join(f"{x:.2f}" for x in out["ratio_chain_vs_full_per_rep"]))
    fr = {r["what"]: r.get("frames_read") for r in runs}
    if fr.get("chain"):
        text += f"\nframes read: full {fr.get('full')}, full + incrementals {fr['chain']}"
    if "incr_bytes_per_changed_page" in out["backups"]:
        text += ("\nbytes stored per changed page of the incrementals (scattered): "
                 f"{out['backups']['incr_bytes_per_changed_page']:.0f}")
    for what in ("full", "chain"):
        s = out["restore"].get(what)
        if s and s.get("requests"):
            text += (f"\nobject-store requests, restore of {what}: {s['requests']:.0f} "
                     f"({s['ranged_gets']:.0f} ranged GETs, {s.get('heads') or 0:.0f} HEADs), "
                     f"{s['wall_s']:.2f} s")
    return out, text


def report_cache(recs):
    runs = [r for r in recs if r.get("kind") == "cache"]
    out = {}
    rows = []
    for t in [r["tool"] for r in runs if r.get("rep") == 1] or sorted({r["tool"] for r in runs}):
        rs = [r for r in runs if r["tool"] == t]
        s = {k: _med(rs, k) for k in ("hot_before_pct", "hot_after_pct", "hot_min_pct",
                                     "hot_mean_pct", "wall_s",
                                     "data_cached_mib", "cg_limit_mib", "cg_max_usage_mib",
                                     "hot_scan_warm_s", "hot_scan_after_s")}
        s["reps"] = len(rs)
        s["values"] = [r.get("hot_after_pct") for r in rs]
        out[t] = s
        s["min_values"] = [r.get("hot_min_pct") for r in rs]
        kept = [100.0 * r["hot_min_pct"] / r["hot_before_pct"] for r in rs
                if r.get("hot_before_pct") and isinstance(r.get("hot_min_pct"), (int, float))]
        s["kept_pct"] = statistics.median(kept) if kept else None
        rows.append([t, s["reps"], s["cg_limit_mib"], s["hot_before_pct"], s["hot_min_pct"],
                     s["kept_pct"], s["hot_mean_pct"], s["hot_after_pct"], s["hot_scan_warm_s"], s["hot_scan_after_s"], s["data_cached_mib"],
                     s["cg_max_usage_mib"], s["wall_s"]])
    text = _table(["reader (in the memory cgroup)", "reps", "cgroup limit MiB",
                   "hot table resident before %", "lowest during %",
                   "lowest / before %", "mean during %",
                   "after %", "hot scan warm s",
                   "first hot scan after s", "relation files cached after MiB",
                   "cgroup peak MiB", "reader wall s"], rows)
    return {"tools": out}, text


def cmd_report(args):
    kind, recs_path, out_path = args
    recs = _load(recs_path)
    fn = {"full": report_full, "incr": report_incr, "restore": report_restore,
          "cache": report_cache}[kind]
    summary, text = fn(recs)
    meta = _meta(recs)
    doc = {"benchmark": kind, "meta": meta, "summary": summary,
           "records": [r for r in recs if r.get("kind") != "meta"]}
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(text)


def cmd_rereport(args):
    """Recompute a results JSON's summary with this bench.py: rereport IN.json OUT.json."""
    with open(args[0]) as f:
        doc = json.load(f)
    tmp = args[1] + ".records"
    with open(tmp, "w") as f:
        f.write(json.dumps(dict(doc["meta"], kind="meta")) + "\n")
        for r in doc["records"]:
            f.write(json.dumps(r) + "\n")
    kind = {"restore": "restore", "incr": "incr", "cache": "cache"}.get(doc["benchmark"], "full")
    try:
        cmd_report([kind, tmp, args[1]])
    finally:
        os.unlink(tmp)


def cmd_show(args):
    """Print the table of a results JSON again (e.g. a committed copy)."""
    with open(args[0]) as f:
        doc = json.load(f)
    recs = [dict(doc["meta"], kind="meta")] + doc["records"]
    fn = {"full": report_full, "incr": report_incr, "restore": report_restore,
          "cache": report_cache}[doc["benchmark"]]
    print(fn(recs)[1])


def cmd_flush(args):
    """flush PATH N BYTES GAP: N times, BYTES written at the next offset and fdatasync'ed."""
    path, n, size, gap = args[0], int(args[1]), int(args[2]), float(args[3])
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(n):
        os.pwrite(fd, os.urandom(size), i * size)
        os.fdatasync(fd)
        time.sleep(gap)
    os.close(fd)


def cmd_dirsync(args):
    """dirsync DIR N GAP: N times a 4 KiB file made durable and renamed, DIR fsync'ed."""
    d, n, gap = args[0], int(args[1]), float(args[2])
    for i in range(n):
        p = os.path.join(d, "dirsync.%d" % i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * 4096)
        os.fdatasync(fd)
        os.close(fd)
        os.rename(p, p + ".done")
        dfd = os.open(d, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        time.sleep(gap)


def cmd_burn(args):
    """burn SECONDS SHARE: busy for SHARE of each millisecond-scale period, asleep the rest
    (the CPU a backup's compression uses, without its reads or writes)."""
    end, share = time.monotonic() + float(args[0]), float(args[1])
    on = 0.001
    off = on * (1 - share) / share if share < 1 else 0
    while time.monotonic() < end:
        t = time.monotonic() + on
        while time.monotonic() < t:
            pass
        if off:
            time.sleep(off)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmds = {"rec": cmd_rec, "pagehash": cmd_pagehash, "fio-json": cmd_fio_json,
            "pgbr-info": cmd_pgbr_info, "info-field": cmd_info_field, "report": cmd_report,
            "show": cmd_show, "rereport": cmd_rereport, "flush": cmd_flush,
            "dirsync": cmd_dirsync, "burn": cmd_burn}
    if sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
