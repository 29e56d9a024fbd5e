#!/bin/bash
# tools/bench/restore_chain.sh — restore time of a full + N incrementals (the latest
# backup of the chain) against restore time of the full alone, each into a fresh
# directory with the page cache dropped first. Between two backups a small batch of
# pgbench transactions (random accounts, tellers, branches, history rows) runs.
# For context, pgBackRest 2.45 restores its own full backup of the same data
# (process-max=2) in the same repetitions.
#
# "command s" is the restore command's wall time; "sync s" the `sync` after it (the
# data a restore leaves dirty in the page cache still has to reach the disk).
#
# Reported: the chain/full ratio, bytes stored per changed page of the incrementals
# (their changes are scattered: random pgbench rows), and each restore's object-store
# requests (total, ranged GETs and HEADs, from the restore summary). With PB_REPO_KIND=s3 the
# repository is on the test S3 server (results restore_chain_s3.json); when a local
# run's results/restore_chain.json exists, the S3/local restore time ratio is printed.
#
# The two restores alternate (full first on odd repetitions, the chain first on even
# ones), each after dropping the page cache; medians of BENCH_REPS (default 5 here:
# single restores of ~1.5 s vary +-25% on a busy machine) are reported.
#
#   tools/bench/restore_chain.sh                 # scale 100, 30 incrementals, 5 reps
#   BENCH_SCALE=20 BENCH_INCRS=30 tools/bench/restore_chain.sh   # the issue's case
#   BENCH_INCRS=10 BENCH_BATCH=500 BENCH_SCALE=50 tools/bench/restore_chain.sh
#   BENCH_SCALE=20 BENCH_INCRS=10 tools/bench/restore_chain.sh &&
#     PB_REPO_KIND=s3 BENCH_SCALE=20 BENCH_INCRS=10 tools/bench/restore_chain.sh
BENCH_REPS=${BENCH_REPS:-5}
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-100}
INCRS=${BENCH_INCRS:-30}
BATCH=${BENCH_BATCH:-1000}       # pgbench transactions between two backups
WITH_PGBR=${BENCH_PGBR:-1}
NAME=restore_chain
if [ "$PB_REPO_KIND" = s3 ]; then
    NAME=restore_chain_s3
    WITH_PGBR=${BENCH_PGBR:-0} # pgBackRest's own repository is local
fi

bench_setup "$NAME"
bench_pgbr_prepare
bench_cluster "$SCALE"

pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_wait_archived "$SRC"
bench_pb backup --type full --pgdata "$SRC" || pb_die "full backup failed"
FULL_ID=$(pb_last_id)
read -r stored <<<"$(bench_pb_info "$FULL_ID" bytes_stored)"
bench_rec kind=backup type=full wall_s="$T_WALL" stored_bytes="$stored" id="$FULL_ID"
pb_log "full $FULL_ID: ${T_WALL}s"
if [ "$WITH_PGBR" = 1 ]; then
    bench_pgbr_backup full || pb_die "pgbackrest full backup failed"
    PGBR_FULL=$PGBR_LABEL
fi

for i in $(seq 1 "$INCRS"); do
    "$PB_PGBIN/pgbench" -n -t $((BATCH / 2)) -c 2 -j 2 -h "$PGHOST" -p "$PGPORT" -U postgres \
        postgres >"$BENCH_TMP/pgbench.out" 2>&1 || { cat "$BENCH_TMP/pgbench.out" >&2; pb_die "pgbench failed"; }
    bench_pb backup --type incr --pgdata "$SRC" || pb_die "incremental $i failed"
    id=$(pb_last_id)
    read -r changed stored <<<"$(bench_pb_info "$id" pages_changed bytes_stored)"
    bench_rec kind=backup type=incr n="$i" wall_s="$T_WALL" pages_changed="$changed" \
        stored_bytes="$stored" id="$id"
    pb_log "incremental $i/$INCRS $id: $changed pages changed, ${T_WALL}s"
done
LAST_ID=$(pb_last_id)
[ "$(bench_pb_info "$LAST_ID" restore_needs | tr -cd , | wc -c)" = "$INCRS" ] ||
    pb_log "WARNING: the latest backup's chain is not full + $INCRS"

# restore_one WHAT SET: timed restore into a fresh directory, then sync.
restore_one() {
    local what=$1 set=$2 d=$PB_WORK/restore.$1 t0 t1 sync_s size chain frames line req=0 ranged=0 heads=0
    rm -rf "$d"
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    bench_drop_caches
    if [ "$what" = pgbackrest ]; then
        bench_time_pg pgbackrest --config="$PGBR_CONF" --stanza=bench --pg1-path="$d" \
            restore --set="$set" >"$BENCH_TMP/pb.out" 2>&1
        [ "$T_RC" = 0 ] || { cat "$BENCH_TMP/pb.out" >&2; return 1; }
        chain=1 frames=0
    else
        bench_pb restore --target-dir "$d" --set "$set" || return 1
        line=$(grep -m1 '^restored backup' "$BENCH_TMP/pb.out")
        chain=$(sed -n 's/.*(chain of \([0-9]*\)).*/\1/p' <<<"$line")
        frames=$(sed -n 's/.* \([0-9]*\) frames read.*/\1/p' <<<"$line")
        line=$(grep -m1 'object-store requests' "$BENCH_TMP/pb.out")
        req=$(sed -n 's/.*requests: \([0-9]*\) requests.*/\1/p' <<<"$line")
        ranged=$(sed -n 's/.* \([0-9]*\) ranged GET.*/\1/p' <<<"$line")
        heads=$(sed -n 's/.* \([0-9]*\) HEAD.*/\1/p' <<<"$line")
    fi
    t0=$(date +%s.%N)
    sync
    t1=$(date +%s.%N)
    sync_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
    size=$(du -sm "$d" | cut -f1)
    bench_rec kind=restore what="$what" rep="$REP" set="$set" chain_length="${chain:-0}" \
        frames_read="${frames:-0}" requests="${req:-0}" ranged_gets="${ranged:-0}" heads="${heads:-0}" \
        wall_s="$T_WALL" sync_s="$sync_s" \
        total_s="$(awk -v a="$T_WALL" -v b="$sync_s" 'BEGIN {printf "%.2f", a + b}')" \
        cpu_s="$T_CPU" rss_mib="$T_RSS_MIB" restored_mib="$size"
    pb_log "rep $REP restore $what (chain $chain): ${T_WALL}s + sync ${sync_s}s, $size MiB"
    rm -rf "$d"
}

for REP in $(seq 1 "$BENCH_REPS"); do
    if [ $((REP % 2)) = 1 ]; then
        restore_one full "$FULL_ID" && restore_one chain "$LAST_ID" || pb_die "restore failed"
    else
        restore_one chain "$LAST_ID" && restore_one full "$FULL_ID" || pb_die "restore failed"
    fi
    if [ "$WITH_PGBR" = 1 ]; then
        restore_one pgbackrest "$PGBR_FULL" || pb_die "pgbackrest restore failed"
    fi
done

echo
echo "Restore of full + $INCRS incrementals vs the full alone, pgbench scale $SCALE," \
    "$BENCH_REPS repetitions (medians):"
bench_report restore
LOCAL_JSON=$BENCH_RESULTS/restore_chain.json
if [ "$NAME" = restore_chain_s3 ] && [ -f "$LOCAL_JSON" ]; then
    /usr/bin/python3 - "$LOCAL_JSON" "$BENCH_RESULTS/$NAME.json" <<'PY'
import json, sys
loc, s3 = (json.load(open(p))["summary"] for p in sys.argv[1:3])
for what in ("full", "chain"):
    a, b = loc["restore"].get(what), s3["restore"].get(what)
    if a and b and a.get("wall_s"):
        print(f"S3/local restore time ({what}): {b['wall_s'] / a['wall_s']:.2f} "
              f"({b['wall_s']:.1f} s against {a['wall_s']:.1f} s)")
PY
fi
