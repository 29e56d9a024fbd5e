#!/bin/bash
# A full and a chain of incrementals of scattered (random pgbench) updates: the chain's
# restore equals the source, and it costs a bounded number of object-store requests
# (the read plan coalesces each pack's frames into a few ranged GETs). Backup and
# restore summaries report their requests. Runs under PB_REPO_KIND=s3 too.
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about what a chain restore reads.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
SRC=$PB_WORK/src
INCRS=${PB_INCRS:-10}
[ "$PB_REPO_KIND" = s3 ] && INCRS=${PB_INCRS:-3} # S3 backups are slower: fewer, same checks
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" "${PB_SCALE:-2}" || pb_die "pgbench init failed"
pg_psql "$SRC" "VACUUM FREEZE" >/dev/null
pg_psql "$SRC" "CHECKPOINT" >/dev/null

# requests LINE KIND: the count of KIND ("requests", "ranged GET", ...) in a summary.
requests() {
    sed -n "s/.*object-store requests: \(.*\)/\1/p" <<<"$1" | tr ',()' '\n\n\n' |
        sed -n "s/^ *\([0-9]*\) $2 *\$/\1/p" | head -1
}

IDS=()
BACKUP_OUT=
backup() {
    BACKUP_OUT=$(pb backup "$@" 2>&1) || { echo "$BACKUP_OUT" >&2; pb_die "backup $* failed"; }
    IDS+=("$(pb_last_id)")
}
backup --type full
FULL=${IDS[0]}
put=$(requests "$BACKUP_OUT" PUT)
pb_check "full backup summary counts its requests ($put PUTs)" test "${put:-0}" -gt 0
for i in $(seq 1 "$INCRS"); do
    "$PB_PGBIN/pgbench" -n -t 100 -c 2 -j 2 -h "$PGHOST" -p "$PGPORT" -U postgres postgres \
        >"$PB_WORK/pgbench.out" 2>&1 || { cat "$PB_WORK/pgbench.out" >&2; pb_die "pgbench failed"; }
    backup --type incr
done
LAST=${IDS[-1]}
DIGEST=$(pg_digest_all "$SRC")
pb_assert_eq "$(pb_info_field "$LAST" restore_needs | tr -cd , | wc -c)" "$INCRS" \
    "the newest backup's chain is the full + $INCRS incrementals"
CHANGED=0 STORED=0
for id in "${IDS[@]:1}"; do
    read -r changed stored <<<"$(pb_info_fields "$id" pages_changed bytes_stored)"
    CHANGED=$((CHANGED + changed))
    STORED=$((STORED + stored))
done
PER_PAGE=$((STORED / (CHANGED ? CHANGED : 1)))
pb_log "$CHANGED pages changed over $INCRS incrementals, $STORED bytes stored ($PER_PAGE per page)"
# Scattered changed pages share frames (one per file region, compressed together):
# about 0.6 KiB per page here, against 1.1 KiB with a frame per run.
pb_check "incrementals store $PER_PAGE bytes per changed page (<= 800)" test "$PER_PAGE" -le 800

# restore_requests SET DIR: restore, print the summary's total and ranged GETs.
restore_requests() {
    mkdir -p "$2" && chmod 0700 "$2" && _pb_chown_pg "$2"
    pb restore --target-dir "$2" --set "$1" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
    local line
    line=$(grep 'object-store requests' "$PB_WORK/restore.out")
    echo "$(requests "$line" requests) $(requests "$line" "ranged GET")"
}

read -r FULL_REQ FULL_RANGED <<<"$(restore_requests "$FULL" "$PB_WORK/rfull")"
pb_check "restore of the full reports its requests ($FULL_REQ, $FULL_RANGED ranged)" \
    test -n "$FULL_REQ" -a -n "$FULL_RANGED"
read -r CHAIN_REQ CHAIN_RANGED <<<"$(restore_requests "$LAST" "$PB_WORK/rchain")"
pb_check "restore of the chain reports its requests ($CHAIN_REQ, $CHAIN_RANGED ranged)" \
    test -n "$CHAIN_REQ" -a -n "$CHAIN_RANGED"
# Each incremental adds a handful of reads per changed file and pack (its packs are
# small), not one per frame: the chain's ranged GETs stay within the full's plus 40
# per incremental, and far below one per changed page.
pb_check "chain restore: $CHAIN_RANGED ranged GETs <= full's $FULL_RANGED + 40 x $INCRS" \
    test "${CHAIN_RANGED:-999999}" -le $((${FULL_RANGED:-0} + 40 * INCRS))
pb_check "chain restore: $CHAIN_RANGED ranged GETs < $CHANGED changed pages / 4" \
    test $((${CHAIN_RANGED:-999999} * 4)) -lt "$CHANGED"
pb_log "restore requests: full $FULL_REQ ($FULL_RANGED ranged), chain $CHAIN_REQ ($CHAIN_RANGED ranged)"
# No HEAD: a read ahead learns where a pack ends from its own ranged GET, and a manifest
# opens with one read of its first bytes. Each incremental's small packs are read once
# for all workers (engine/pack/pack_cache.c): a few requests per incremental, not per file.
HEADS=$(requests "$(grep 'object-store requests' "$PB_WORK/restore.out")" HEAD)
pb_check "chain restore sends no HEAD (sent $HEADS)" test "${HEADS:-1}" = 0
pb_check "chain restore: $CHAIN_REQ requests <= full's $FULL_REQ + 6 x $INCRS" \
    test "${CHAIN_REQ:-999999}" -le $((${FULL_REQ:-0} + 6 * INCRS))

pg_reconfigure "$PB_WORK/rchain" && pg_conf "$PB_WORK/rchain" "archive_mode = off"
if pg_start "$PB_WORK/rchain" && pb_wait_recovery "$PB_WORK/rchain"; then
    pb_assert_eq "$(pg_digest_all "$PB_WORK/rchain")" "$DIGEST" \
        "restore of the full + $INCRS chain: digests equal the source"
    pg_stop "$PB_WORK/rchain"
    pb_check "restore of the chain: pg_checksums --check" pg_checksums_check "$PB_WORK/rchain"
else
    pb_test_fail "restored chain starts"
fi
pb_check "verify the chain" pb verify --set "$LAST"
pb_test_summary
