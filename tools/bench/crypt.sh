#!/bin/bash
# tools/bench/crypt.sh — the cost of encryption (docs/FORMAT.md, "Encrypted
# repositories"), side by side in one run on one cluster: a full backup and its restore
# into an unencrypted repository and into an encrypted one (--encrypt-key-file). WAL is
# archived into both, so each backup finds its WAL. The page cache is dropped before
# every run; each repetition alternates which repository goes first. Reports medians:
# wall time, MiB/s, CPU, peak RSS, stored bytes, and the encrypted/unencrypted ratios
# (target: encrypted at most 10% slower).
#
#   tools/bench/crypt.sh                           # scale 100 (~1.5 GB), 3 repetitions
#   BENCH_SCALE=2 BENCH_REPS=1 tools/bench/crypt.sh   # smoke run
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-100}

bench_setup crypt
KEY=$PB_WORK/bench.key
head -c 32 /dev/urandom | base64 >"$KEY" && chmod 600 "$KEY" && _pb_chown_pg "$KEY"
ENC_REPO=$PB_WORK/repo-enc
ENC_STATE=$PB_WORK/state-enc
mkdir -p "$ENC_REPO" "$ENC_STATE" && _pb_chown_pg "$ENC_REPO" "$ENC_STATE"
PLAIN_ARGS=("${PB_REPO_ARGS[@]}")
PLAIN_STATE=$PB_STATE
ENC_ARGS=(--repo "$ENC_REPO" --encrypt-key-file "$KEY")
bench_pgbr_prepare
BENCH_ARCHIVE_COMMAND="$PB_BIN archive-push %p ${ENC_ARGS[*]} && $BENCH_ARCHIVE_COMMAND"
bench_cluster "$SCALE"
bench_rec kind=setup scale="$SCALE" data_mib="$(du -sm --exclude=pg_wal "$SRC" | cut -f1)"

mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "null"}'; }

use_repo() {
    if [ "$1" = encrypted ]; then
        PB_REPO_ARGS=("${ENC_ARGS[@]}") PB_STATE=$ENC_STATE REPO_DIR=$ENC_REPO
    else
        PB_REPO_ARGS=("${PLAIN_ARGS[@]}") PB_STATE=$PLAIN_STATE REPO_DIR=$PB_REPO
    fi
}

# record TOOL BYTES [INNER_SECONDS] [key=value...]
record() {
    local tool=$1 bytes=$2 inner=${3:-$T_WALL}
    shift 3
    bench_rec kind=run tool="$tool" rep="$REP" wall_s="$T_WALL" cpu_s="$T_CPU" \
        rss_mib="$T_RSS_MIB" read_mib="$(mib "$bytes")" inner_s="$inner" \
        mib_s_wall="$(div "$(mib "$bytes")" "$T_WALL")" \
        mib_s_inner="$(div "$(mib "$bytes")" "$inner")" "$@"
    pb_log "rep $REP $tool: wall ${T_WALL}s, $(div "$(mib "$bytes")" "$T_WALL") MiB/s"
}

run_one() {
    local kind=$1 id read stored secs d=$PB_WORK/restore
    use_repo "$kind"
    pg_psql "$SRC" "CHECKPOINT" >/dev/null
    bench_wait_archived "$SRC"
    bench_drop_caches
    bench_pb backup --type full --pgdata "$SRC" || return 1
    id=$(pb_last_id)
    read -r read stored secs <<<"$(bench_pb_info "$id" bytes_read bytes_stored seconds)"
    record "backup ($kind)" "$read" "$secs" stored_mib="$(mib "$(du -sb "$REPO_DIR/backup/$id" | cut -f1)")"
    rm -rf "$d" && mkdir -p "$d" && chmod 700 "$d" && _pb_chown_pg "$d"
    bench_drop_caches
    bench_pb restore --target-dir "$d" --set "$id" || return 1
    record "restore ($kind)" "$(du -sb --exclude=pg_wal "$d" | cut -f1)" "$T_WALL"
    rm -rf "$d"
}

for REP in $(seq 1 "$BENCH_REPS"); do
    if [ $((REP % 2)) = 1 ]; then order=(plain encrypted); else order=(encrypted plain); fi
    for kind in "${order[@]}"; do
        run_one "$kind" || pb_die "$kind run failed"
    done
done

echo
echo "Encryption cost, pgbench scale $SCALE, $BENCH_REPS repetitions (medians):"
bench_report full
/usr/bin/python3 - "$BENCH_RESULTS/$BENCH_NAME.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["summary"]["tools"]
for what in ("backup", "restore"):
    p, e = t.get(f"{what} (plain)", {}), t.get(f"{what} (encrypted)", {})
    if p.get("mib_s_wall") and e.get("mib_s_wall"):
        cost = 100 * (1 - e["mib_s_wall"] / p["mib_s_wall"])
        print(f"{what}: encrypted {e['mib_s_wall']:.1f} MiB/s vs {p['mib_s_wall']:.1f} MiB/s "
              f"unencrypted = {abs(cost):.1f}% {'slower' if cost > 0 else 'faster'}")
PY
