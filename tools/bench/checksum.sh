#!/bin/bash
# tools/bench/checksum.sh — the page checksum's cost on one core, two ways:
#   wall      GB/s of page bytes and ns per page from tools/bench/checksum_bench, the best
#             of BENCH_REPS runs (meaningful only on a quiet machine)
#   callgrind instructions per page, counted by valgrind's callgrind inside the checksum
#             function alone (repeatable on a busy machine; CHECKSUM_CALLGRIND=0 skips it)
# for "vec" (engine/pack/page.c: PostgreSQL's 32-lane layout built vectorized, AVX2 where the CPU
# has it) and "plain" (a word-by-word reference built without vectorization). Prints a table
# and writes docs/bench-results/checksum-<commit>.json (BENCH_RESULTS overrides the folder).
#
#   tools/bench/checksum.sh                       # build/tools/bench/checksum_bench
#   BENCH_REPS=5 CHECKSUM_BENCH=build-bench/tools/bench/checksum_bench tools/bench/checksum.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${CHECKSUM_BENCH:-$SRC/build/tools/bench/checksum_bench}
REPS=${BENCH_REPS:-3}
PAGES=${CHECKSUM_PAGES:-4096}
ROUNDS=${CHECKSUM_ROUNDS:-8}
OUT=${BENCH_RESULTS:-$SRC/docs/bench-results}
[ -x "$BIN" ] || { echo "no $BIN: build first (make tools/bench/checksum_bench)" >&2; exit 1; }
COMMIT=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
TMP=$(mktemp -d /tmp/pb-checksum.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Wall clock: the best run of each implementation (the least disturbed one).
for r in $(seq "$REPS"); do
    "$BIN" --pages "$PAGES" --rounds "$ROUNDS" --json "$TMP/wall-$r.json" >/dev/null
done

# Instructions per page: only the checksum function's own instructions are collected.
count() { # IMPL FUNCTION
    local n=1000
    valgrind --tool=callgrind --toggle-collect="$2" --callgrind-out-file="$TMP/cg.$1" \
        "$BIN" --pages "$n" --rounds 1 --impl "$1" >/dev/null 2>&1
    awk -v n="$n" '/^summary:/ {printf "%.0f", $2 / n}' "$TMP/cg.$1"
}
VEC_INSN=null PLAIN_INSN=null
if [ "${CHECKSUM_CALLGRIND:-1}" = 1 ] && command -v valgrind >/dev/null; then
    VEC_INSN=$(count vec page_checksum)
    PLAIN_INSN=$(count plain plain_checksum)
fi

CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
AVX2=$(grep -qw avx2 /proc/cpuinfo && echo true || echo false)
mkdir -p "$OUT"
python3 - "$TMP" "$REPS" "$OUT/checksum-$COMMIT.json" "$COMMIT" "$CPU" "$AVX2" \
    "$VEC_INSN" "$PLAIN_INSN" <<'PY'
import json, sys, glob, datetime
tmp, reps, out, commit, cpu, avx2, vec_insn, plain_insn = sys.argv[1:]
runs = [json.load(open(f)) for f in sorted(glob.glob(tmp + "/wall-*.json"))]
insn = {"vec": None if vec_insn == "null" else int(vec_insn),
        "plain": None if plain_insn == "null" else int(plain_insn)}
rows = []
for impl in ("vec", "plain"):
    res = [r for run in runs for r in run["results"] if r["impl"] == impl]
    best = max(res, key=lambda r: r["gb_per_s"])
    rows.append({"impl": impl, "gb_per_s_best": best["gb_per_s"],
                 "ns_per_page_best": best["ns_per_page"],
                 "gb_per_s_runs": [r["gb_per_s"] for r in res],
                 "instructions_per_page": insn[impl]})
doc = {"bench": "checksum", "commit": commit,
       "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
       "cpu": cpu, "avx2": avx2 == "true", "pages": runs[0]["pages"],
       "rounds": runs[0]["rounds"], "reps": int(reps), "results": rows}
json.dump(doc, open(out, "w"), indent=2)
print(f"page checksums, commit {commit}, {cpu}, {doc['pages']} pages x {doc['rounds']} rounds, best of {reps}")
print(f"{'impl':6} {'GB/s':>8} {'ns/page':>9} {'instr/page':>11}")
for r in rows:
    i = r["instructions_per_page"]
    print(f"{r['impl']:6} {r['gb_per_s_best']:8.2f} {r['ns_per_page_best']:9.1f} {i if i is not None else '-':>11}")
print("wrote", out)
PY
