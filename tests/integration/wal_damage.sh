#!/bin/bash
# Damaged WAL that recovery would replay: a restore reads every segment from the backup's
# start to its stop (and on to its target) before writing, and refuses naming the damaged
# segment, its target left empty: a byte flipped in the stored object, the object cut in
# half, a record's byte flipped in a segment archived with a valid envelope (its CRC),
# the segment's WAL zeroed from the backup's start on. verify --set fails on the same
# damage, and so does verify of the whole repository on the record's CRC. Damage after
# the backup's stop refuses a target past it, not a restore to the backup's end; the
# undamaged archive restores to an LSN target and starts, and the segments a restore
# point's search decoded are not read a second time. Small cluster.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
[ "$PB_REPO_KIND" = posix ] || pb_die "wal_damage.sh damages objects in a posix repository"
pb_pgbench_source 1
q() { pg_psql "$SRC" "$1"; }

pb_backup_logged --type full --checkpoint fast || pb_die "backup failed"
F=$(pb_last_id)
read -r START STOP START_LSN < <(pb_info_fields "$F" start_wal stop_wal start_lsn)
F_END=${EPOCHREALTIME%[.,]*}
# Two more segments of WAL after the backup; an LSN target in the last one.
for i in 1 2; do
    q "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
       SELECT 1, 1, g, $i, now() FROM generate_series(1, 2000) g" >/dev/null
    q "SELECT pg_switch_wal()" >/dev/null
done
q "CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 100) g" >/dev/null
LSN=$(q "SELECT pg_current_wal_lsn()")
q "SELECT pg_create_restore_point('p1')" >/dev/null
q "INSERT INTO t SELECT g FROM generate_series(101, 200) g" >/dev/null
pb_archive_all "$SRC" || pb_die "WAL not archived"
pb_next_second "$F_END"
NOW=$(PGTZ=UTC q "SELECT now()")
AFTER=$(printf '%s%08X' "${STOP:0:16}" $((16#${STOP:16:8} + 1)))
pb_log "backup $F: WAL $START..$STOP (start $START_LSN); after it $AFTER; target LSN $LSN"

obj() { echo "$PB_REPO/wal/${1:0:8}/$1.zst"; }
RAW=$PB_WORK/raw
mkdir -p "$RAW" && _pb_chown_pg "$RAW"
# save NAME / put_back NAME: keep the stored object aside, and put it back.
save() { cp -p "$(obj "$1")" "$PB_WORK/$1.orig"; }
put_back() { cp -p "$PB_WORK/$1.orig" "$(obj "$1")"; }
flip_at() { # FILE OFFSET: flip one bit of the byte at OFFSET
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1")
    printf "$(printf '\\x%02x' $((b ^ 0x10)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
# repush NAME PYTHON: fetch the raw segment, change it with PYTHON (data: a bytearray;
# off: the backup's start within the segment), and archive it again in its place (a
# valid envelope around damaged WAL, as a damaged pg_wal file would be pushed).
repush() {
    local f=$RAW/$1
    pb archive-get "$1" "$f" >/dev/null || return 1
    python3 - "$f" "$((16#${START_LSN#*/} % (16 * 1024 * 1024)))" <<PY || return 1
import sys
p, off = sys.argv[1], int(sys.argv[2])
data = bytearray(open(p, "rb").read())
$2
open(p, "wb").write(data)
PY
    _pb_chown_pg "$f"
    rm -f "$(obj "$1")"
    pb archive-push "$f" >/dev/null && rm -f "$f"
}
# verify_fails LABEL NAME: verify --set F fails naming NAME.
verify_fails() {
    local out
    if out=$(pb verify --set "$F" 2>&1); then
        pb_test_fail "$1: verify --set $F passed"
    elif grep -q "$2" <<<"$out"; then
        pb_test_ok "$1: verify --set $F fails naming $2"
    else
        pb_test_fail "$1: verify --set $F does not name $2: $out"
    fi
}
restored_ok() { # LABEL RESTORE_ARGS...: the restore exits 0 (its target then removed)
    local label=$1 d=$PB_WORK/ok
    shift
    mkdir -p "$d" && _pb_chown_pg "$d"
    pb_check "$label" pb restore --target-dir "$d" "$@"
    rm -rf "$d"
}

save "$START"
save "$AFTER"

# 1. A byte flipped in the stored object of the backup's first segment.
flip_at "$(obj "$START")" $(($(stat -c %s "$(obj "$START")") / 2))
pb_refused "flipped byte in the stored $START: restore refused" \
    "WAL segment $START, needed to make backup $F consistent.*nothing was written" --set "$F"
verify_fails "flipped byte in the stored $START" "$START"
put_back "$START"

# 2. The stored object cut in half.
truncate -s $(($(stat -c %s "$(obj "$START")") / 2)) "$(obj "$START")"
pb_refused "half of the stored $START: restore refused" \
    "WAL segment $START, needed to make backup $F consistent.*nothing was written" --set "$F"
put_back "$START"

# 3. A byte of the record at the backup's start (its xid, under the CRC) flipped in the
# segment itself, archived again with a valid envelope: only decoding sees it.
pb_check "re-archive $START with a record's byte flipped" repush "$START" "data[off + 5] ^= 0x10"
pb_refused "a record's byte flipped in $START: restore refused naming its CRC" \
    "WAL segment $START, needed to make backup $F consistent.*nothing was written.*CRC" \
    --set "$F"
verify_fails "a record's byte flipped in $START" "$START"
out=$(pb verify 2>&1)
if [ $? != 0 ] && grep -q "WAL segment $START, needed to make backup $F consistent.*CRC" <<<"$out"; then
    pb_test_ok "a record's byte flipped in $START: verify of the repository fails naming it"
else
    pb_test_fail "a record's byte flipped in $START: verify of the repository: $out"
fi
put_back "$START"

# 4. The segment's WAL zeroed from the backup's start on (a half-written file).
pb_check "re-archive $START zeroed from the backup's start" repush "$START" \
    "data[off:] = bytes(len(data) - off)"
pb_refused "$START zeroed from the backup's start: restore refused" \
    "WAL segment $START, needed to make backup $F consistent, is damaged.*nothing was written" \
    --set "$F"
put_back "$START"

# 5. Damage after the backup's stop: only a restore that replays past it is refused.
flip_at "$(obj "$AFTER")" $(($(stat -c %s "$(obj "$AFTER")") / 2))
restored_ok "damaged $AFTER (after the backup's stop): restore to the backup's end works" \
    --set "$F"
pb_refused "damaged $AFTER: an LSN target past it is refused" \
    "WAL segment $AFTER, needed to replay backup $F to the recovery target.*nothing was written" \
    --target-lsn "$LSN"
pb_refused "damaged $AFTER: a time target past it is refused" \
    "WAL segment $AFTER, needed to replay backup $F to the recovery target.*nothing was written" \
    --target-time "$NOW"
put_back "$AFTER"

# 6. Undamaged again: verify passes, and a restore to the LSN target starts with the rows
# written before it.
pb_check "verify --set $F passes on the undamaged archive" pb verify --set "$F"
if pb_restore_start "$PB_WORK/r" --target-lsn "$LSN"; then
    pb_assert_eq "$(pg_psql "$PB_WORK/r" "SELECT count(*) FROM t")" 100 \
        "restore to the LSN target: the rows before it"
    pb_check "the restore says it read and checked the WAL replay needs" \
        grep -q "read and checked the WAL recovery replays" "$PB_WORK/restore.out"
    pg_stop "$PB_WORK/r"
else
    pb_test_fail "restore to the LSN target on the undamaged archive"
fi
# 7. The cost: a restore-point target is placed by decoding the segments (no cache yet),
# and the check does not read them a second time.
rm -rf "$PB_STATE/walscan"
mkdir -p "$PB_WORK/r3" && _pb_chown_pg "$PB_WORK/r3"
pb restore --target-dir "$PB_WORK/r3" --target-name p1 >"$PB_WORK/r3.out" 2>&1
pb_check "a restore-point target: the segments its search decoded are not read again" \
    grep -qE "read and checked the WAL recovery replays, .*: 0 segments \([1-9][0-9]* more read \
by the target search\)" "$PB_WORK/r3.out"
pb_test_summary
