#!/bin/bash
# Point-in-time restore: a full and two incrementals while rows are inserted one per
# transaction (stamped with clock_timestamp() and their txid) and restore points are
# created; restores to times (in several time zones), LSNs, xids and restore point names
# between and after the backups must hold exactly the rows committed before the target.
# Also: which backup is chosen, refusals before anything is written, and archive-get
# (prefetch spool, quiet "not found").
source "$(dirname "$0")/pb_lib.sh"
# pageback's threads at normal CPU priority (SCHED_IDLE, the default, barely runs on a busy
# test machine; polite_io.sh checks the priorities themselves): this script is about recovery targets.
export PAGEBACK_CPU_PRIORITY=${PAGEBACK_CPU_PRIORITY-normal}
pb_setup
# Commit timestamps are what recovery_target_time is compared with: keep them.
pb_source_cluster "track_commit_timestamp = on"

q() { pg_psql "$SRC" "$1"; }
q "CREATE TABLE t (id bigserial PRIMARY KEY, ts timestamptz NOT NULL, txid bigint NOT NULL,
                   tag text NOT NULL)" >/dev/null
pb_ins_procedure "$SRC" "ts, txid, tag" "clock_timestamp(), txid_current(), tg" 0.01

# mark NAME: insert a few rows, then remember for the last one (id K_NAME) its commit
# time (T_NAME, UTC text), the WAL position after it (L_NAME), its xid (X_NAME), and
# create restore point rp_NAME; pause so that the next commit is clearly later.
mark() {
    local n=$1 k
    q "CALL ins(5, '$n')" >/dev/null
    k=$(q "SELECT max(id) FROM t")
    printf -v "K_$n" %s "$k"
    printf -v "T_$n" %s "$(time_in "$k" UTC)"
    printf -v "L_$n" %s "$(q "SELECT pg_current_wal_lsn()")"
    printf -v "X_$n" %s "$(q "SELECT txid FROM t WHERE id = $k")"
    q "SELECT pg_create_restore_point('rp_$n')" >/dev/null
    sleep 0.3
    q "CALL ins(5, '$n-after')" >/dev/null
}

# time_in ID ZONE [plain]: the commit time of row ID in time zone ZONE, in PostgreSQL's
# own text form ("2026-11-30 09:22:48.123457+05:30"); "plain" leaves the zone out.
time_in() {
    PGTZ=$2 q "SELECT pg_xact_commit_timestamp(xmin)${3:+::timestamp} FROM t WHERE id = $1"
}

backup() {
    pb_backup_logged --type "$1" || return 1
    pb_next_second # stop times are whole seconds: targets below are clearly later
}

q "CALL ins(10, 'A')" >/dev/null
mark A
pb_check "full backup" backup full
F1=$(pb_last_id)
q "CALL ins(10, 'B')" >/dev/null
mark B
pb_check "first incremental" backup incr
I1=$(pb_last_id)
q "CALL ins(10, 'C')" >/dev/null
mark C
pb_check "second incremental" backup incr
I2=$(pb_last_id)
pb_assert_eq "$(pb_info_field "$I2" type)" incr "the last backup is an incremental"
q "CALL ins(10, 'D')" >/dev/null
mark D
q "CALL ins(5, 'E')" >/dev/null
# Archive everything written so far.
pb_archive_all "$SRC"
ALL=$(q "SELECT max(id) FROM t")
pb_log "rows: A..$K_A B..$K_B C..$K_C D..$K_D total $ALL; backups $F1 $I1 $I2"

# pitr LABEL EXPECTED_MAX_ID EXPECTED_SET RESTORE_ARGS...: restore, start, check which
# backup was restored and that the copy holds the source's rows up to the id; stop, check
# that no prefetch spool is left behind, and remove.
pitr() {
    local label=$1 k=$2
    shift 2
    pb_pitr "$label" "$(pb_rows "$SRC" "$k")" "$@"
}
spool_gone() { [ -d "$2/pg_wal/pageback-spool" ] && pb_test_fail "$1: prefetch spool left behind"; }
PB_PITR_AFTER=spool_gone

# ---- time targets, in several spellings and zones
pitr "time between full and incr 1 (UTC)" "$K_B" "$F1" --target-time "$T_B"
pitr "time between incr 1 and 2 (+05:30)" "$K_C" "$I1" \
    --target-time "$(time_in "$K_C" Asia/Kolkata)"
pitr "time after the last backup (America/New_York)" "$K_D" "$I2" \
    --target-time "$(time_in "$K_D" America/New_York)"
pitr "exclusive time (UTC)" $((K_C - 1)) "$I1" --target-time "$T_C" --target-exclusive
# A time without a zone is read in pageback's local time zone (TZ reaches it here).
TZ=Asia/Tokyo pitr "time without zone read in the local zone (TZ=Asia/Tokyo)" "$K_B" "$F1" \
    --target-time "$(time_in "$K_B" Asia/Tokyo plain)"

# Other spellings of the same instant choose the same backup (restored, not started).
chosen() {
    local d=$PB_WORK/chosen
    mkdir -p "$d" && _pb_chown_pg "$d"
    pb restore --target-dir "$d" "$@" 2>/dev/null | sed -n 's/^restored backup \([^ ]*\) .*/\1/p'
    pb_rm_bg "$d"
}
ISO=${T_C% *}T${T_C#* }
pb_assert_eq "$(chosen --target-time "${ISO%+00}Z")" "$I1" "time as ISO 8601 with Z (${ISO%+00}Z)"
pb_assert_eq "$(chosen --target-time "${T_C%+00} UTC")" "$I1" "time with a UTC suffix"
KOL=$(time_in "$K_C" Asia/Kolkata)
pb_assert_eq "$(chosen --target-time "${KOL/+05:30/+0530}")" "$I1" "time with a +0530 offset"

# ---- LSN targets
pitr "LSN between full and incr 1" "$K_B" "$F1" --target-lsn "$L_B"
pitr "LSN after the last backup, exclusive" "$K_D" "$I2" --target-lsn "$L_D" \
    --target-exclusive

# ---- xid and restore point targets: the newest backup unless --set says otherwise. After
# the last backup only the choice is checked here: wal_targets.sh restores and starts
# name and xid targets after the last backup and compares their rows.
pb_assert_eq "$(chosen --target-xid "$X_D")" "$I2" "xid after the last backup: restored backup $I2"
pitr "xid between full and incr 1, exclusive, --set" $((K_B - 1)) "$F1" --target-xid "$X_B" \
    --target-exclusive --set "$F1"
pb_assert_eq "$(chosen --target-name rp_D)" "$I2" \
    "restore point after the last backup: restored backup $I2"
pitr "restore point between incr 1 and 2, --set" "$K_C" "$I1" --target-name rp_C --set "$I1"

# ---- refusals, before anything is written
pb_refused "time before the first backup ended" "no backup .* can reach the recovery target" \
    --target-time "$T_A"
pb_refused "LSN before the first backup ended" "no backup .* can reach the recovery target" \
    --target-lsn "$L_A"
pb_refused "--set of a backup ending after the time target" "cannot reach the recovery target" \
    --set "$I2" --target-time "$T_B"
pb_refused "LSN beyond the archived WAL" "WAL segment [0-9A-F]{24} needed to replay" \
    --target-lsn "FF/10"
pb_refused "unreadable time" "cannot read --target-time" --target-time "yesterday noon"

# ---- archive-get: prefetch spool, "not found" is a quiet exit 1
G=$PB_WORK/get
mkdir -p "$G/pg_wal" && _pb_chown_pg "$G"
START=$(pb_info_field "$F1" start_wal)
pb_archive_cat() { pb archive-get "$1" "$G/pg_wal/CHECK" && cat "$G/pg_wal/CHECK"; }
next_seg() { printf '%s%08X' "${1:0:16}" $((16#${1:16:8} + $2)); }
pb_check "archive-get of a segment" pb archive-get "$START" "$G/pg_wal/RECOVERYXLOG"
pb_assert_eq "$(stat -c %s "$G/pg_wal/RECOVERYXLOG")" $((16 << 20)) "a whole segment was written"
NEXT=$(next_seg "$START" 1)
spooled() { compgen -G "$G/pg_wal/pageback-spool/$1.*" >/dev/null; }
for i in $(seq 1 100); do
    spooled "$NEXT" && break
    sleep 0.1
done
pb_check "the next segment was prefetched into the spool" spooled "$NEXT"
pb_check "archive-get of the next segment" pb archive-get "$NEXT" "$G/pg_wal/RECOVERYXLOG"
pb_check "it was taken from the spool" eval '! spooled "$NEXT"'
AFTER=$(next_seg "$START" 2)
for i in $(seq 1 100); do
    spooled "$AFTER" && break
    sleep 0.1
done
SPOOLED=$(compgen -G "$G/pg_wal/pageback-spool/$AFTER.*")
printf 'XXXX' | dd of="$SPOOLED" bs=1 seek=100000 conv=notrunc status=none
pb_check "a damaged spooled segment is refetched" pb archive-get "$AFTER" "$G/pg_wal/AFTER"
pb_assert_eq "$(md5sum <"$G/pg_wal/AFTER")" \
    "$(PAGEBACK_ARCHIVE_PREFETCH=0 pb_archive_cat "$AFTER" | md5sum)" \
    "the refetched segment is the archived one"
pb_assert_eq "$(md5sum <"$G/pg_wal/RECOVERYXLOG")" \
    "$(PAGEBACK_ARCHIVE_PREFETCH=0 pb_archive_cat "$NEXT" | md5sum)" \
    "the spooled copy equals the archived segment"
out=$(pb archive-get 0000000100000099000000FF "$G/pg_wal/RECOVERYXLOG" 2>&1)
pb_assert_eq "$?:$out" "1:" "a missing segment exits 1 without a message"
out=$(pb archive-get 00000009.history "$G/pg_wal/RECOVERYHISTORY" 2>&1)
pb_assert_eq "$?:$out" "1:" "a missing history file exits 1 without a message"
rm -rf "$G"

pb_test_summary
