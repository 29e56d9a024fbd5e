#!/bin/bash
# Incrementals that read only what changed: the same chain of workloads taken
# with --incremental-mode scan, file and wal, every backup restored and
# compared with the source; a verify scan after each chain finds zero missed pages; a
# file-mode incremental after a small change reads far less than a scan, a wal-mode one
# under 5% of the data directory; a test fault that makes the file-level skip miss a
# changed segment is caught by the verify scan; an archive gap forces the fallback.
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about what each incremental mode reads.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
# No autovacuum: what changes between two backups is what the steps change, so the read
# counts below are the skip rule's and not a background worker's.
pb_pgbench_source "${PB_SCALE:-1}"
psql_src() { pg_psql "$SRC" "$@" >/dev/null; }
mkdir -p "$PB_WORK/ts1" && _pb_chown_pg "$PB_WORK/ts1"
psql_src "CREATE TABLESPACE ts1 LOCATION '$PB_WORK/ts1'"
TSOID=$(pg_psql "$SRC" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")
tsdir() { mkdir -p "$PB_WORK/ts-$1" && _pb_chown_pg "$PB_WORK/ts-$1" && echo "$PB_WORK/ts-$1"; }

declare -A DIGEST
LAST=
# backup TYPE ARGS...: one backup; LAST is its id, DIGEST[id] the source's digest (taken
# only for a backup that is restored below: NO_DIGEST=1 says it is not).
backup() {
    local want=$1 out
    shift
    out=$(pb backup "$@" 2>&1) || { echo "$out" >&2; pb_test_fail "backup $* failed"; return 1; }
    LAST=$(pb_last_id)
    [ "${LAST:15:1}" = "$want" ] || { echo "$out" >&2; pb_test_fail "$LAST: expected type $want"; }
    [ "${NO_DIGEST:-0}" = 1 ] || DIGEST[$LAST]=$(pg_digest_all "$SRC")
    echo "$out" >"$PB_WORK/backup-$LAST.out"
}
field() { pb_info_field "$1" "$2"; }
restore_check() {
    local id=$1 d=$PB_WORK/r-$1
    if pb_restore_start "$d" --set "$id" --tablespace-map "$TSOID=$(tsdir "r-$id")"; then
        pb_assert_eq "$(pg_digest_all "$d")" "${DIGEST[$id]}" "restore of $id ($2): digests equal the source"
        pg_stop "$d"
    else
        pb_test_fail "restore of $id ($2)"
    fi
    pb_rm_bg "$d"
    pb_rm_bg "$PB_WORK/ts-r-$id"
}

# The workload of step N of chain T (names carry T so the chains do not collide).
step() {
    local n=$1 t=$2
    case $n in
    1)  # a small change, hint bits of fresh rows, an unlogged table (empty: not backed up)
        psql_src "UPDATE small_$t SET v = v || 'x' WHERE id <= 20"
        psql_src "SELECT count(*) FROM hints_$t"
        psql_src "CREATE UNLOGGED TABLE unl_$t (id int, v text)" ;;
    2)  # truncation at the end of a file, TRUNCATE, VACUUM FULL, SET TABLESPACE
        psql_src "DELETE FROM shrink_$t WHERE id > 2000"
        psql_src "VACUUM shrink_$t"
        psql_src "TRUNCATE gone_$t"
        psql_src "VACUUM FULL pgbench_tellers"
        psql_src "ALTER TABLE move_$t SET TABLESPACE ts1"
        psql_src "INSERT INTO unl_$t SELECT g, md5(g::text) FROM generate_series(1, 3000) g"
        psql_src "ALTER TABLE unl_$t SET LOGGED" ;;
    3)  # databases both ways, a table created and filled in one transaction
        psql_src "CREATE DATABASE fc_$t STRATEGY FILE_COPY"
        psql_src "CREATE DATABASE wl_$t STRATEGY WAL_LOG"
        pg_psql "$SRC" "CREATE TABLE t AS SELECT g FROM generate_series(1, 2000) g" "wl_$t" >/dev/null
        psql_src "BEGIN; CREATE TABLE onetx_$t (id int, v text);
                  INSERT INTO onetx_$t SELECT g, md5(g::text) FROM generate_series(1, 5000) g;
                  COMMIT" ;;
    4)  # drop what step 3 made, more pgbench
        psql_src "DROP DATABASE fc_$t"
        psql_src "DROP DATABASE wl_$t"
        pgbench_run_bg "$SRC" 2 2
        pgbench_wait ;;
    esac
}
setup_chain() {
    local t=$1
    psql_src "CREATE TABLE small_$t (id int PRIMARY KEY, v text)"
    psql_src "INSERT INTO small_$t SELECT g, md5(g::text) FROM generate_series(1, 500) g"
    psql_src "CREATE TABLE shrink_$t AS SELECT g AS id, repeat('s', 200) AS v FROM generate_series(1, 10000) g"
    psql_src "CREATE TABLE gone_$t AS SELECT g AS id FROM generate_series(1, 5000) g"
    psql_src "CREATE TABLE move_$t AS SELECT g AS id FROM generate_series(1, 5000) g"
    psql_src "VACUUM FREEZE"
    psql_src "CREATE TABLE hints_$t AS SELECT g AS id FROM generate_series(1, 20000) g"
    psql_src "CHECKPOINT"
    pb_past_skip_margin # the checkpoint's writes: the full may skip them next time
}

# run_chain MODE: a full, four incrementals in MODE (no verify scan), then a verify scan.
declare -A SMALL_READ
run_chain() {
    local mode=$1 ids=() id
    setup_chain "$mode"
    # Restored below: a scan chain's newest, each incremental of the other chains.
    local scan_only=0 other_only=0
    [ "$mode" = scan ] && scan_only=1 || other_only=1
    NO_DIGEST=1 backup F --type full && ids+=("$LAST")
    local full_read
    full_read=$(field "$LAST" bytes_read)
    for n in 1 2 3 4; do
        step $n "$mode"
        NO_DIGEST=$scan_only backup I --incremental-mode "$mode" --verify-scan 0 && ids+=("$LAST")
        [ $n = 1 ] && SMALL_READ[$mode]=$(field "$LAST" bytes_read)
    done
    pb_assert_eq "$(field "$LAST" read_mode)" "$mode" "chain $mode: incrementals read in mode $mode"
    if [ "$mode" != scan ]; then
        pb_check "chain $mode: the no-change parts were skipped ($(field "${ids[1]:-}" files_skipped) files)" \
            test "$(field "${ids[1]:-}" files_skipped)" -gt 0
        pb_check "chain $mode: a small change read ${SMALL_READ[$mode]} B of a $full_read B full (< 1/4)" \
            test $((SMALL_READ[$mode] * 4)) -lt "$full_read"
    fi
    if [ "$mode" = wal ]; then
        local info
        info=$(pb info 2>&1 | grep -A3 "^$LAST ")
        pb_check "chain wal: info gives a WAL-guided incremental's database size" \
            grep -qE "database [0-9.]+ (KiB|MiB|GiB)" <<<"$info"
        # The step-1 change (20 rows, the hint bits of a 20000-row table, a new table) is
        # about 2% of this cluster's pages; the segments it touches are far larger.
        pb_check "chain wal: a small change read ${SMALL_READ[wal]} B of a $full_read B full (< 5%)" \
            test $((SMALL_READ[wal] * 100)) -lt $((full_read * 5))
        pb_check "chain wal: the WAL window was decoded" \
            grep -q "WAL window: .* distinct blocks named" "$PB_WORK/backup-${ids[1]:-}.out"
        # The segment of the backup's start is read from pg_wal only up to that start (it
        # read all 16 MiB: a recycled segment's old bytes, from the disk, every time).
        local kib
        kib=$(sed -n 's/.*WAL window: .*; \([0-9]*\) KiB of pg_wal read.*/\1/p' \
            "$PB_WORK/backup-${ids[1]:-}.out")
        pb_check "chain wal: ${kib:-?} KiB of the 16 MiB start segment read from pg_wal" \
            test "${kib:-16384}" -lt 16384
    fi
    psql_src "UPDATE small_$mode SET v = 'verify' WHERE id = 7"
    NO_DIGEST=$other_only backup I --incremental-mode "$mode" --verify-scan 1 && ids+=("$LAST")
    if [ "$mode" != scan ]; then
        pb_assert_eq "$(field "$LAST" verify_scan)" True "chain $mode: the last incremental is a verify scan"
    fi
    pb_assert_eq "$(field "$LAST" pages_missed)" 0 "chain $mode: the verify scan found no missed page"
    # A scan-mode chain is the baseline every other test restores: its newest is enough.
    # A cheaper chain restores each backup, as a wrong skip shows only in its own restore
    # when a later backup reads the file again.
    if [ "$mode" = scan ]; then
        restore_check "$LAST" "chain $mode"
    else
        for id in "${ids[@]:1:4}"; do
            restore_check "$id" "chain $mode"
        done
    fi
}

for mode in ${PB_RL_MODES:-scan file wal}; do
    run_chain "$mode"
    LASTMODE=$mode
done
[ -n "${SMALL_READ[scan]:-}" ] && pb_check "a file-mode incremental after a small change read less than a scan-mode one" \
    test "${SMALL_READ[file]}" -lt "${SMALL_READ[scan]}"

# The truth: a fault makes the file-level skip miss the first changed segment; the verify
# scan reads it anyway, ships the change, logs an ERROR naming file and block, counts it.
psql_src "UPDATE small_$LASTMODE SET v = 'missed' WHERE id <= 50"
out=$(_pb_as_pg env PAGEBACK_TEST_FAULT=backup.skip-miss PGHOST="$PGHOST" PGPORT="$PGPORT" \
    PGUSER=postgres PGDATABASE=postgres "$PB_BIN" backup "${PB_REPO_ARGS[@]}" \
    --state-dir "$PB_STATE" --incremental-mode file --verify-scan 1 2>&1) ||
    { echo "$out" >&2; pb_test_fail "backup under the skip-miss fault"; }
LAST=$(pb_last_id)
DIGEST[$LAST]=$(pg_digest_all "$SRC")
MISSED=$(field "$LAST" pages_missed)
pb_check "the verify scan counted the pages the faulty skip missed ($MISSED)" test "$MISSED" -gt 0
pb_check "and logged an ERROR naming the file and block" \
    grep -Eq "ERROR.*verify scan: .* block [0-9]+ changed" <<<"$out"
pb_check "info shows the missed pages" grep -q "missed pages $MISSED (BUG" <<<"$(pb info)"
restore_check "$LAST" "after the caught miss"

# An archive gap in the window: WAL cannot vouch, the backup falls back to the file-level
# skip for the whole backup and says why; its restore is still right.
if [ -n "${SMALL_READ[wal]:-}" ] && [ "$PB_REPO_KIND" != s3 ]; then
    psql_src "UPDATE small_wal SET v = 'gap1' WHERE id <= 5"
    SEG=$(pg_psql "$SRC" "SELECT pg_walfile_name(pg_current_wal_lsn())")
    psql_src "SELECT pg_switch_wal()"
    psql_src "UPDATE small_wal SET v = 'gap2' WHERE id <= 5"
    psql_src "SELECT pg_switch_wal()"
    for i in $(seq 1 100); do
        [ -f "$PB_REPO/wal/${SEG:0:8}/$SEG.zst" ] && break
        sleep 0.1
    done
    rm -f "$PB_REPO/wal/${SEG:0:8}/$SEG.zst"
    backup I --incremental-mode wal --verify-scan 0
    pb_check "archive gap: the WAL-guided read falls back and says why" \
        grep -q "fall back to the file-level skip for the whole backup: a gap in the WAL archive" \
        "$PB_WORK/backup-$LAST.out"
    pb_assert_eq "$(field "$LAST" read_mode)" file "archive gap: the backup read in file mode"
    restore_check "$LAST" "after the archive gap"
fi

# Without data checksums (and wal_log_hints off) hint-bit writes are not WAL-logged: a
# wal-mode incremental says so and falls back to the file-level skip, which sees them.
# A cluster of its own, with its own repository (one repository holds one cluster).
if [ "$PB_REPO_KIND" != s3 ]; then
    SRC2=$PB_WORK/src2 REPO2=$PB_WORK/repo2 STATE2=$PB_WORK/state2
    mkdir -p "$REPO2" "$STATE2" && _pb_chown_pg "$REPO2" "$STATE2"
    PB_ARCHIVE_COMMAND="$PB_BIN archive-push %p --repo $REPO2" pg_init_cluster "$SRC2" --no-checksums &&
        pg_conf "$SRC2" "autovacuum = off" && pg_start "$SRC2" || pb_die "second cluster did not start"
    pg_env "$SRC2"
    pb2() { pb "$@" --repo "$REPO2" --state-dir "$STATE2"; }
    pg_psql "$SRC2" "CREATE TABLE h AS SELECT g AS id FROM generate_series(1, 20000) g" >/dev/null
    pg_psql "$SRC2" "CHECKPOINT" >/dev/null
    pb2 backup --type full >/dev/null 2>&1 || pb_test_fail "no checksums: full backup"
    pg_psql "$SRC2" "SELECT count(*) FROM h" >/dev/null # sets hint bits, logs nothing
    out=$(pb2 backup --incremental-mode wal --verify-scan 1 2>&1) ||
        { echo "$out" >&2; pb_test_fail "no checksums: incremental"; }
    pb_check "no checksums: hint bits named as the reason to fall back" \
        grep -q "hint bits are not WAL-logged" <<<"$out"
    ID2=$(pb2 info --json | /usr/bin/python3 -c 'import json,sys; b=json.load(sys.stdin)["backups"][-1]; print(b["read_mode"], b["pages_missed"], b["pages_changed"])')
    read -r mode2 missed2 changed2 <<<"$ID2"
    pb_assert_eq "$mode2 $missed2" "file 0" "no checksums: file mode, the verify scan found no missed page"
    pb_check "no checksums: the hint-bit pages were shipped ($changed2)" test "$changed2" -gt 0
    pg_env "$SRC"
fi
pb_test_summary
