#!/bin/bash
# tools/bench/side_by_side.sh — pageback beside pgBackRest (the newest native build of
# tools/pgnative.sh: zst, repo-bundle + repo-block, --type=incr) and the server's own
# pg_basebackup --incremental + pg_combinebackup, on one PostgreSQL 17+ cluster (default
# 18, BENCH_PG / BENCH_PGBIN; tools/pgnative.sh pg 18 builds it with every client).
#
# One pgbench cluster (scale BENCH_SCALE, default 60: about 900 MB) with summarize_wal on
# and autovacuum off. The three tools alternate (the first tool rotates every round):
# a full backup each; BENCH_ROUNDS (5) rounds of BENCH_PCT (1) % scattered change — the
# UPDATE of random rows of pgbench_accounts (as many as 1% of its pages), tellers and
# branches — each followed by an incremental of every tool (pageback WAL-guided, from the
# server's WAL summaries: read_mode summaries; pg_basebackup -Fp --incremental=<the
# previous manifest>); then the newest backup of each tool is restored (pg_combinebackup
# for pg_basebackup's chain), started, and its table digests compared with the source's.
# Last, summarize_wal is turned off and the same rounds run once more for pageback alone
# (read_mode wal: the archived WAL decoded; "+verify" marks pageback's periodic verify
# scan, which reads every page on purpose). Every tool starts from a fast checkpoint
# (pageback --checkpoint fast, pg_basebackup -c fast, pgBackRest start-fast); pageback's
# per-step timing line is logged after each of its backups.
#
# Per tool per round: wall seconds, CPU seconds (the tool's process tree; for
# pg_basebackup also the server's walsenders, reaped by the postmaster), bytes stored
# (pageback: bytes_stored + the manifest; pgBackRest: its backup directory;
# pg_basebackup: its directory), and bytes read (/proc/<pid>/io of the tool's tree plus
# the postmaster's reaped children: read_bytes from storage, rchar through read calls;
# pageback's own bytes_read beside them; /proc also counts loading the programs and
# reading the tools' own repositories). The blocks a round's UPDATEs wrote are counted
# by pg_walinspect in their WAL (when the extension is there); pageback's pages read /
# pages changed (what its hashes found changed over its whole window, which also holds
# hint bits set by reading rows) is the target "<= 1.1x with summaries".
#
#   tools/pgnative.sh pg 18 && tools/pgnative.sh pgbackrest   # once (minutes)
#   tools/bench/side_by_side.sh                  # scale 60, 5 rounds of 1%
#   BENCH_SCALE=2 BENCH_ROUNDS=2 tools/bench/side_by_side.sh   # smoke test
BENCH_PG=${BENCH_PG:-18}
source "$(dirname "$0")/lib.sh"
SCALE=${BENCH_SCALE:-60}
ROUNDS=${BENCH_ROUNDS:-5}
PCT=${BENCH_PCT:-1}

for t in pg_basebackup pg_combinebackup psql pgbench; do
    [ -x "$PB_PGBIN/$t" ] || pb_die "no $t in $PB_PGBIN (tools/pgnative.sh pg ${BENCH_PG:-18} builds one with every client)"
done
PGMAJOR=$("$PB_PGBIN/postgres" --version | sed -n 's/.* \([0-9][0-9]*\)[.a-z].*/\1/p')
[ "${PGMAJOR:-0}" -ge 17 ] || pb_die "pg_basebackup --incremental needs PostgreSQL 17 or later ($PB_PGBIN is ${PGMAJOR:-unknown})"
bench_setup "side_by_side_pg$PGMAJOR"
bench_pgbr_prepare
bench_cluster "$SCALE" "autovacuum = off" "summarize_wal = on"
# Block incremental (and the bundling it needs) for every pgBackRest backup.
sed -i 's/^\[global\]$/[global]\nrepo1-bundle=y\nrepo1-block=y/' "$PGBR_CONF"
WALINSPECT=false
pg_psql "$SRC" "CREATE EXTENSION pg_walinspect" >/dev/null 2>&1 && WALINSPECT=true
[ "$WALINSPECT" = true ] || pb_log "no pg_walinspect in $PB_PGBIN: changed pages from pageback's report"
BB=$PB_WORK/bb
mkdir -p "$BB" && _pb_chown_pg "$BB"
bench_rec kind=setup scale="$SCALE" rounds="$ROUNDS" pct="$PCT" pg_major="$PGMAJOR" \
    walinspect="$WALINSPECT" source_bytes="$(du -sb --exclude=pg_wal "$SRC" | cut -f1)"

# ---------------------------------------------------------------- measuring

# postmaster_io: "read_bytes rchar cpu_ticks" of the postmaster and its reaped children.
postmaster_io() {
    local pid
    pid=$(head -n 1 "$SRC/postmaster.pid")
    awk '/^read_bytes/ {r = $2} /^rchar/ {c = $2} END {printf "%d %d ", r, c}' "/proc/$pid/io"
    awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat"
}

# measured TOOL CMD...: CMD as postgres under /usr/bin/time and a shell that reaps it and
# reports its tree's /proc/<pid>/io; sets T_* and IO_READ IO_RCHAR SRV_READ SRV_RCHAR
# SRV_CPU (the postmaster's children that ended meanwhile: pg_basebackup's walsenders).
measured() {
    local tool=$1 io=$BENCH_TMP/io.$1 a b
    shift
    bench_drop_caches
    a=$(postmaster_io)
    rm -f "$io"
    bench_time_pg bash -c '"${@:2}"; rc=$?; cat /proc/$$/io >"$1"; exit $rc' io "$io" "$@" \
        >"$BENCH_TMP/$tool.out" 2>&1
    b=$(postmaster_io)
    if [ "$T_RC" != 0 ]; then
        echo "$tool failed (exit $T_RC):" >&2
        tail -n 20 "$BENCH_TMP/$tool.out" >&2
        return 1
    fi
    IO_READ=$(awk '/^read_bytes/ {print $2}' "$io")
    IO_RCHAR=$(awk '/^rchar/ {print $2}' "$io")
    read -r SRV_READ SRV_RCHAR SRV_CPU <<<"$(awk -v a="$a" -v b="$b" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {split(a, x, " "); split(b, y, " ");
                printf "%d %d %.2f", y[1] - x[1], y[2] - x[2], (y[3] - x[3]) / hz}')"
}

# record KIND TOOL ROUND STORED key=value...: one measurement.
record() {
    bench_rec kind="$1" tool="$2" round="$3" stored_bytes="$4" "${@:5}" wall_s="$T_WALL" \
        cpu_s="$T_CPU" server_cpu_s="$SRV_CPU" rss_mib="$T_RSS_MIB" read_bytes="$IO_READ" \
        rchar="$IO_RCHAR" server_read_bytes="$SRV_READ" server_rchar="$SRV_RCHAR"
    pb_log "  $2 $1: ${T_WALL}s, stored $4 B, read $IO_READ+$SRV_READ B (rchar $IO_RCHAR+$SRV_RCHAR)"
}

pb_run() {
    measured pageback env PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres PGDATABASE=postgres \
        "$PB_BIN" "$1" "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" "${@:2}"
}

# ---------------------------------------------------------------- the three tools

backup_pageback() {
    local type=$1 id fields man
    pb_run backup --type "$type" --pgdata "$SRC" --checkpoint fast --log-level detail || return 1
    id=$(pb_last_id) && PB_LAST=$id
    fields=$(bench_pb_info "$id" bytes_stored bytes_read pages_scanned pages_changed read_mode \
        verify_scan) || return 1
    read -r stored bread scanned changed mode verify <<<"$fields"
    man=$(stat -c %s "$PB_REPO/backup/$id/manifest" 2>/dev/null || echo 0)
    PB_CHANGED=$changed PB_SCANNED=$scanned
    record "$type" pageback "$ROUND" "$((stored + man))" pb_bytes_read="$bread" \
        pages_scanned="$scanned" pages_changed="$changed" read_mode="$mode" \
        verify_scan="$verify" changed_pages="${CHANGED_PAGES:-}" summarize_wal="$SUMMARIZE" id="$id"
    pb_log "    pageback read_mode $mode: $scanned pages read, $changed changed"
    pb_log "    pageback $(sed -n 's/^pageback: DETAIL: \(steps: .*\)/\1/p' "$BENCH_TMP/pageback.out")"
}

backup_pgbackrest() {
    measured pgbackrest "$BENCH_PGBACKREST" --config="$PGBR_CONF" --stanza=bench backup \
        --type="$1" || return 1
    pgbr info --output=json >"$BENCH_TMP/pgbr-info.json" || return 1
    PGBR_LABEL=$(/usr/bin/python3 -c "
import json, sys
print(json.load(open(sys.argv[1]))[0]['backup'][-1]['label'])" "$BENCH_TMP/pgbr-info.json")
    record "$1" pgbackrest "$ROUND" "$(bench_pgbr_stored "$PGBR_LABEL")" label="$PGBR_LABEL"
}

backup_basebackup() {
    local d=$BB/$ROUND inc=()
    [ "$ROUND" -gt 0 ] && inc=(--incremental="$BB/$((ROUND - 1))/backup_manifest")
    measured pg_basebackup "$PB_PGBIN/pg_basebackup" -D "$d" -Fp -X stream -c fast \
        -h "$PGHOST" -p "$PGPORT" -U postgres "${inc[@]}" || return 1
    record "$1" pg_basebackup "$ROUND" "$(du -sb "$d" | cut -f1)"
}

TOOLS=(pageback pgbackrest basebackup)
# each_tool TYPE: one backup of every tool, the first one rotating with the round.
each_tool() {
    local i n=${#TOOLS[@]}
    for i in $(seq 0 $((n - 1))); do
        "backup_${TOOLS[$(((ROUND + i) % n))]}" "$1" || pb_die "${TOOLS[$(((ROUND + i) % n))]} $1 backup failed (round $ROUND)"
    done
}

# change: BENCH_PCT % of pgbench_accounts' pages worth of random rows, a few tellers and
# branches; sets CHANGED_PAGES (distinct blocks in the WAL of the change).
change() {
    local n l0 l1
    n=$(pg_psql "$SRC" "SELECT greatest(1, ceil(relpages * $PCT / 100.0))::int FROM pg_class
                        WHERE relname = 'pgbench_accounts'") || return 1
    l0=$(pg_psql "$SRC" "SELECT pg_current_wal_insert_lsn()") || return 1
    pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid IN
            (SELECT 1 + floor(random() * $((SCALE * 100000)))::int FROM generate_series(1, $n));
        UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid IN
            (SELECT 1 + floor(random() * $((SCALE * 10)))::int FROM generate_series(1, $SCALE));
        UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid IN
            (SELECT 1 + floor(random() * $SCALE)::int FROM generate_series(1, 2))" >/dev/null ||
        return 1
    l1=$(pg_psql "$SRC" "SELECT pg_current_wal_insert_lsn()") || return 1
    CHANGED_PAGES=
    if [ "$WALINSPECT" = true ]; then
        CHANGED_PAGES=$(pg_psql "$SRC" "SELECT count(*) FROM (SELECT DISTINCT reltablespace,
            reldatabase, relfilenode, relforknumber, relblocknumber
            FROM pg_get_wal_block_info('$l0', '$l1', false)) b") || return 1
    fi
    bench_rec kind=change round="$ROUND" rows="$n" summarize_wal="$SUMMARIZE" \
        wal_bytes="$(pg_psql "$SRC" "SELECT '$l1'::pg_lsn - '$l0'::pg_lsn")" \
        changed_pages="${CHANGED_PAGES:-}"
    pb_log "round $ROUND: $n account rows updated, ${CHANGED_PAGES:-?} blocks changed"
    bench_wait_archived "$SRC"
}

# ---------------------------------------------------------------- restores

# started_matches TOOL DIR: start a restored copy on its own port without archiving,
# compare its digests with the source's, stop it.
started_matches() {
    local d=$2 got
    pg_reconfigure "$d" && pg_conf "$d" "archive_mode = off" || return 1
    pg_start "$d" && pb_wait_recovery "$d" || return 1
    got=$(pg_digest "$d") || return 1
    pg_stop "$d"
    if [ "$got" != "$SRC_DIGEST" ]; then
        echo "$1: restored tables differ from the source:" >&2
        diff <(echo "$SRC_DIGEST") <(echo "$got") >&2
        return 1
    fi
}

restore_tool() {
    local tool=$1 d=$PB_WORK/restore.$1 name=${1/#basebackup/pg_basebackup}
    rm -rf "$d"
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    case $tool in
        pageback) pb_run restore --target-dir "$d" --set "$PB_LAST" ;;
        pgbackrest) measured pgbackrest "$BENCH_PGBACKREST" --config="$PGBR_CONF" \
            --stanza=bench --pg1-path="$d" restore --set="$PGBR_LABEL" --type=immediate \
            --target-action=promote ;;
        basebackup) measured pg_combinebackup "$PB_PGBIN/pg_combinebackup" \
            -o "$d" $(for i in $(seq 0 "$ROUNDS"); do echo "$BB/$i"; done) ;;
    esac || return 1
    record restore "$name" "$ROUNDS" "$(du -sb "$d" | cut -f1)" || return 1
    started_matches "$name" "$d" || return 1
    bench_rec kind=digest tool="$name" match=true
    pb_log "  $name: restored copy started, digests match"
    rm -rf "$d"
}

# ---------------------------------------------------------------- the run

SUMMARIZE=on
pg_psql "$SRC" "CHECKPOINT" >/dev/null
bench_wait_archived "$SRC"
ROUND=0
each_tool full
for ROUND in $(seq 1 "$ROUNDS"); do
    change || pb_die "change of round $ROUND failed"
    each_tool incr
done
SRC_DIGEST=$(pg_digest "$SRC") || pb_die "digest of the source failed"
for i in 0 1 2; do
    restore_tool "${TOOLS[$(((ROUNDS + i) % 3))]}" || pb_die "restore by ${TOOLS[$(((ROUNDS + i) % 3))]} failed"
done

# The same rounds without WAL summaries: pageback decodes the archived WAL.
SUMMARIZE=off
pg_conf "$SRC" "summarize_wal = off" && pg_psql "$SRC" "SELECT pg_reload_conf()" >/dev/null
for ROUND in $(seq $((ROUNDS + 1)) $((2 * ROUNDS))); do
    change || pb_die "change of round $ROUND failed"
    backup_pageback incr || pb_die "pageback incremental failed (round $ROUND, summaries off)"
done

echo
echo "PostgreSQL $PGMAJOR side by side, pgbench scale $SCALE, $ROUNDS rounds of $PCT% scattered change:"
bench_rec kind=meta_end loadavg_end="$(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$BENCH_DIR/side_by_side.py" "$BENCH_REC" "$BENCH_RESULTS/$BENCH_NAME.json" ||
    pb_die "report failed"
echo
echo "results: $BENCH_RESULTS/$BENCH_NAME.json"
