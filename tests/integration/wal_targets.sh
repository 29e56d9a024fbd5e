#!/bin/bash
# Recovery targets placed by reading the archived WAL: restore point names and
# transaction ids before, between and after backups choose the newest backup that becomes
# consistent before them, and each restore holds exactly the rows committed before the
# target. Also: a name used twice (said, the first used), a name and an xid that are not
# in the archive (refused, nothing written), the WAL scan cache (a second restore decodes
# nothing), `info --restore-points`, and targets on a second timeline.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster "max_prepared_transactions = 5"

q() { pg_psql "$SRC" "$1"; }
q "CREATE TABLE t (id bigserial PRIMARY KEY, txid bigint NOT NULL, tag text NOT NULL)" >/dev/null
pb_ins_procedure "$SRC" "txid, tag" "txid_current(), tg"

# mark NAME: a few rows, then for the last one (id K_NAME) its xid X_NAME; restore point
# rp_NAME; more rows after it.
mark() {
    local n=$1 k
    q "CALL ins(5, '$n')" >/dev/null
    k=$(q "SELECT max(id) FROM t")
    printf -v "K_$n" %s "$k"
    printf -v "X_$n" %s "$(q "SELECT txid FROM t WHERE id = $k")"
    q "SELECT pg_create_restore_point('rp_$n')" >/dev/null
    q "CALL ins(5, '$n-after')" >/dev/null
}
backup() { pb_backup_logged --type "$1"; }

mark A
pb_check "full backup" backup full
F1=$(pb_last_id)
mark B
q "SELECT pg_create_restore_point('rp_twice')" >/dev/null
K_TWICE=$(q "SELECT max(id) FROM t")
q "CALL ins(3, 'twice-between')" >/dev/null
q "SELECT pg_create_restore_point('rp_twice')" >/dev/null
pb_check "incremental backup" backup incr
I1=$(pb_last_id)
mark C
# A prepared transaction: its COMMIT PREPARED record names it by the xid in xinfo.
q "BEGIN; INSERT INTO t (txid, tag) VALUES (txid_current(), 'prepared'); PREPARE TRANSACTION 'p1'" >/dev/null
X_P=$(q "SELECT transaction FROM pg_prepared_xacts WHERE gid = 'p1'")
[ -n "$X_P" ] && q "COMMIT PREPARED 'p1'" >/dev/null
K_P=$(q "SELECT max(id) FROM t")
q "CALL ins(3, 'after-prepared')" >/dev/null
pb_check "source WAL archived" pb_archive_all "$SRC"
pb_log "rows: A..$K_A B..$K_B C..$K_C twice..$K_TWICE prepared $X_P..$K_P; backups $F1 $I1"

expect() { pb_rows "$SRC" "$1"; }

# pitr LABEL EXPECTED_ROWS EXPECTED_SET FOUND_PATTERN RESTORE_ARGS...: restore, check the
# backup chosen, start, compare the rows, stop, check the record named, and remove.
pitr() {
    local label=$1 want=$2 set=$3
    FOUND=$4
    shift 4
    pb_pitr "$label" "$want" "$set" "$@"
}
said_found() {
    if grep -qE "found the recovery target: $FOUND" "$PB_WORK/restore.out"; then
        pb_test_ok "$1: says which record it found"
    else
        pb_test_fail "$1: no 'found the recovery target: $FOUND' in: $(cat "$PB_WORK/restore.out")"
    fi
}
PB_PITR_AFTER=said_found
LSN='[0-9A-F]+/[0-9A-F]+'
pitr "name between the backups" "$(expect "$K_B")" "$F1" \
    "restore point rp_B at $LSN on timeline 1" --target-name rp_B
pitr "name after the last backup" "$(expect "$K_C")" "$I1" \
    "restore point rp_C at $LSN on timeline 1" --target-name rp_C
pitr "xid between the backups" "$(expect "$K_B")" "$F1" \
    "commit transaction $X_B at $LSN on timeline 1" --target-xid "$X_B"
pitr "xid after the last backup, exclusive" "$(expect $((K_C - 1)))" "$I1" \
    "commit transaction $X_C" --target-xid "$X_C" --target-exclusive
if [ -n "$X_P" ]; then
    pitr "xid of a prepared transaction" "$(expect "$K_P")" "$I1" \
        "commit of the prepared transaction $X_P" --target-xid "$X_P"
else
    pb_test_fail "the prepared transaction could not be made (max_prepared_transactions?)"
fi
pitr "name used twice: the first" "$(expect "$K_TWICE")" "$F1" \
    "restore point rp_twice at $LSN" --target-name rp_twice
pb_check "name used twice: said so" grep -q "rp_twice' occurs 2 times" "$PB_WORK/restore.out"

# The second restore of a target found before decodes no segment: the cache answers
# (restored only: the rows were checked above).
AGAIN=$PB_WORK/again
mkdir -p "$AGAIN" && _pb_chown_pg "$AGAIN"
pb restore --target-dir "$AGAIN" --target-name rp_B >"$PB_WORK/again.out" 2>&1
pb_check "the repeated search chose the same backup" \
    grep -q "^restored backup $F1 " "$PB_WORK/again.out"
pb_check "the repeated search decoded nothing" \
    grep -qE " 0 segments decoded, [1-9][0-9]* from the cache" "$PB_WORK/again.out"
rm -rf "$AGAIN"
pb_check "the cache is in the state directory" \
    eval 'compgen -G "$PB_STATE/walscan/0000000100000000000000*" >/dev/null'

# ---- refusals, before anything is written
pb_refused "a name that does not exist" \
    "restore point 'rp_nowhere' is not in the archived WAL .*searched from $LSN to $LSN" \
    --target-name rp_nowhere
pb_refused "an xid that does not exist" "transaction '4000000' is not in the archived WAL" \
    --target-xid 4000000
pb_refused "a name before the first backup became consistent" \
    "no backup .* can reach the recovery target .*after the restore point rp_A" \
    --target-name rp_A
pb_refused "an xid before the first backup became consistent" \
    "no backup .* can reach .*after the commit transaction $X_A" --target-xid "$X_A"

# ---- info --restore-points
out=$(pb info --restore-points 2>&1)
for n in rp_A rp_B rp_C; do
    pb_check "info --restore-points lists $n" grep -qE "^$n +$LSN +1 " <<<"$out"
done
pb_assert_eq "$(grep -c '^rp_twice ' <<<"$out")" 2 "info --restore-points lists rp_twice twice"

# ---- a second timeline: a restore to rp_C promoted and archiving into the repository
D2=$PB_WORK/tl2
mkdir -p "$D2" && chmod 0700 "$D2" && _pb_chown_pg "$D2"
pb restore --target-dir "$D2" --target-name rp_C --archive-mode preserve >"$PB_WORK/tl2.out" 2>&1 ||
    pb_die "restore for timeline 2 failed: $(cat "$PB_WORK/tl2.out")"
pg_reconfigure "$D2" || pb_die "reconfigure failed"
pg_start "$D2" && pb_wait_recovery "$D2" || pb_die "timeline 2 did not start"
q2() { pg_psql "$D2" "$1"; }
q2 "CALL ins(4, 'T2')" >/dev/null
K_T2=$(q2 "SELECT max(id) FROM t")
X_T2=$(q2 "SELECT txid FROM t WHERE id = $K_T2")
q2 "SELECT pg_create_restore_point('rp_T2')" >/dev/null
q2 "CALL ins(3, 'T2-after')" >/dev/null
WANT_T2=$(pb_rows "$D2" "$K_T2")
pb_assert_eq "$(q2 "SELECT timeline_id FROM pg_control_checkpoint()")" 2 "the copy is on timeline 2"
pb_check "timeline 2 WAL archived" pb_archive_all "$D2"
pg_stop "$D2"
# The source goes on on timeline 1 after the branch point.
mark D
pb_check "source WAL archived again" pb_archive_all "$SRC"

pitr "name on timeline 2" "$WANT_T2" "$I1" "restore point rp_T2 at $LSN on timeline 2" \
    --target-name rp_T2
pitr "xid on timeline 2" "$WANT_T2" "$I1" "commit transaction $X_T2 at $LSN on timeline 2" \
    --target-xid "$X_T2"
pb_refused "a name on timeline 1 after timeline 2 branched off, along latest" \
    "restore point 'rp_D' is not in the archived WAL .*along timeline 2" --target-name rp_D
pitr "the same name with --target-timeline 1" "$(expect "$K_D")" "$I1" \
    "restore point rp_D at $LSN on timeline 1" --target-name rp_D --target-timeline 1

pb_test_summary
