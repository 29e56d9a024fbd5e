#!/usr/bin/python3
"""tools/bench/side_by_side.py RECORDS OUT.json — the tables and results JSON of
side_by_side.sh: every backup and restore per tool per round, then the ratios the
issue's targets are stated in (medians over the incremental rounds):
  pageback incremental wall / pg_basebackup's, stored / pgBackRest's,
  restore wall / the faster peer's, pages read / pages changed (summaries and WAL).
Bytes read are from storage (/proc/<pid>/io read_bytes, the page cache dropped before
each run) and through read calls (rchar), the tool's process tree plus the server's
children that ended meanwhile (pg_basebackup's walsenders)."""
import json
import statistics
import sys

MIB = 1024.0 * 1024.0


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def fmt(v, digits=1):
    if v is None or v == "":
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def table(headers, rows):
    cols = [headers] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(str(r[i])) for r in cols) for i in range(len(headers))]
    out = ["  ".join(str(h).rjust(w) for h, w in zip(headers, widths))]
    out += ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in cols[1:]]
    return "\n".join(out)


def med(vals):
    vals = [v for v in vals if num(v) is not None]
    return statistics.median(vals) if vals else None


def ratio(a, b):
    return a / b if a is not None and b else None


def read_of(r):
    """Bytes the tool and the server's ended children read from storage / through read()."""
    return (r.get("read_bytes", 0) + r.get("server_read_bytes", 0),
            r.get("rchar", 0) + r.get("server_rchar", 0))


def row(r, update_blocks):
    rb, rc = read_of(r)
    pb = r["tool"] == "pageback"
    pages, changed = (r.get("pages_scanned"), r.get("pages_changed")) if pb else (None, None)
    # A periodic verify scan reads every page on purpose (--verify-scan): shown as such.
    mode = r.get("read_mode", "") + ("+verify" if r.get("verify_scan") == "True" else "")
    return [r["round"], r["tool"], r["kind"], mode, r["wall_s"], r["cpu_s"],
            r.get("server_cpu_s"), r["stored_bytes"] / MIB, rb / MIB, rc / MIB,
            num(r.get("pb_bytes_read", "")) / MIB if pb and num(r.get("pb_bytes_read", "")) is not None else None,
            update_blocks, changed, pages, ratio(num(pages), num(changed)) if r["kind"] == "incr" else None]


def main():
    recs = load(sys.argv[1])
    meta = next((r for r in recs if r.get("kind") == "meta"), {})
    changes = {r["round"]: r for r in recs if r.get("kind") == "change"}
    backups = [r for r in recs if r.get("kind") in ("full", "incr") and "tool" in r]
    restores = [r for r in recs if r.get("kind") == "restore"]

    def changed_of(r):
        """The blocks the round's UPDATEs touched (pg_walinspect), if measured."""
        return num(changes.get(r["round"], {}).get("changed_pages"))

    # "changed" is what pageback found changed among the pages it read (its hashes): the
    # whole window since its parent, which also holds what the round's UPDATEs did not
    # write (hint bits set by reading the rows, the visibility map).
    head = ["round", "tool", "kind", "read mode", "wall s", "cpu s", "server cpu s",
            "stored MiB", "read MiB", "rchar MiB", "pb says read MiB", "update blocks", "pb changed pages",
            "pb read pages", "read/changed"]
    on = [b for b in backups if b.get("summarize_wal", "on") == "on"]
    off = [b for b in backups if b.get("summarize_wal") == "off"]
    text = [table(head, [row(b, changed_of(b)) for b in on])]
    text.append("\nRestore of the newest backup (started, digests compared):")
    text.append(table(["tool", "wall s", "cpu s", "restored MiB", "read MiB", "rchar MiB"],
                      [[r["tool"], r["wall_s"], r["cpu_s"], r["stored_bytes"] / MIB,
                        read_of(r)[0] / MIB, read_of(r)[1] / MIB] for r in restores]))
    if off:
        text.append("\npageback with summarize_wal off (the archived WAL decoded):")
        text.append(table(head, [row(b, changed_of(b)) for b in off]))

    def incr(tool, key, rows=on):
        return med([b.get(key) for b in rows if b["tool"] == tool and b["kind"] == "incr"])

    def pb_ratio(rows):
        return med([ratio(num(b.get("pages_scanned")), num(b.get("pages_changed"))) for b in rows
                    if b["tool"] == "pageback" and b["kind"] == "incr"])

    rwall = {r["tool"]: r["wall_s"] for r in restores}
    peers = [rwall[t] for t in ("pgbackrest", "pg_basebackup") if t in rwall]
    summary = {
        "incr_wall_vs_basebackup": ratio(incr("pageback", "wall_s"), incr("pg_basebackup", "wall_s")),
        "incr_stored_vs_pgbackrest": ratio(incr("pageback", "stored_bytes"),
                                           incr("pgbackrest", "stored_bytes")),
        "incr_stored_vs_basebackup": ratio(incr("pageback", "stored_bytes"),
                                           incr("pg_basebackup", "stored_bytes")),
        "restore_wall_vs_faster_peer": ratio(rwall.get("pageback"), min(peers) if peers else None),
        "pages_read_per_changed_summaries": pb_ratio(on),
        "pages_read_per_changed_wal": pb_ratio(off),
        "read_modes": sorted({b.get("read_mode") for b in backups
                              if b["tool"] == "pageback" and b["kind"] == "incr"}),
        "digests_match": sorted(r["tool"] for r in recs if r.get("kind") == "digest"),
    }
    for tool in ("pageback", "pgbackrest", "pg_basebackup"):
        summary[tool] = {"incr_wall_s": incr(tool, "wall_s"), "incr_stored_bytes": incr(tool, "stored_bytes"),
                         "incr_cpu_s": incr(tool, "cpu_s")}
    text.append("\nMedians over the incremental rounds (targets: wall <= 1.0x pg_basebackup's,"
                " stored <= 0.2x pgBackRest's, restore <= 0.7x the faster peer's,"
                " pages read <= 1.1x the changed with summaries):")
    for k in ("incr_wall_vs_basebackup", "incr_stored_vs_pgbackrest", "incr_stored_vs_basebackup",
              "restore_wall_vs_faster_peer", "pages_read_per_changed_summaries",
              "pages_read_per_changed_wal"):
        text.append(f"  {k}: {fmt(summary[k], 2)}")
    text.append(f"  pageback read modes: {', '.join(map(str, summary['read_modes']))};"
                f" digests match: {', '.join(summary['digests_match'])}")
    doc = {"benchmark": "side_by_side", "meta": meta, "summary": summary,
           "records": [r for r in recs if r.get("kind") != "meta"]}
    with open(sys.argv[2], "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
