#!/bin/bash
# A WAL segment missing from the repository: a restore that needs it refuses before
# writing anything and names it; verify of a backup whose window needs it fails naming
# it; a restore that does not need it still works (and warns about the gap when it would
# replay past it).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 1

q() { pg_psql "$SRC" "$1"; }
pb backup --type full >"$PB_WORK/backup.out" 2>&1 || { cat "$PB_WORK/backup.out"; pb_die "backup failed"; }
F=$(pb_last_id)
F_END=${EPOCHREALTIME%[.,]*}
START=$(pb_info_field "$F" start_wal)
STOP=$(pb_info_field "$F" stop_wal)
DIGEST=$(pg_digest_all "$SRC")
# Four more segments of WAL after the backup.
for i in 1 2 3 4; do
    q "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
       SELECT 1, 1, g, 0, now() FROM generate_series(1, 1000) g" >/dev/null
    SEG=$(q "SELECT pg_walfile_name(pg_switch_wal())")
done
LSN=$(q "SELECT pg_current_wal_lsn()")
q "SELECT pg_switch_wal()" >/dev/null
for i in $(seq 1 300); do
    LAST=$(q "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
    [[ "$LAST" < "$SEG" ]] || break
    sleep 0.1
done
# Backup stop times are recorded in whole seconds, so a target in the same second as
# the backup's end cannot be shown to follow it (the choice then refuses, rightly):
# take the target in a later second.
pb_next_second "$F_END"
NOW=$(PGTZ=UTC q "SELECT now()")
# The segment two after the backup's last one.
GAP=$(printf '%s%08X' "${STOP:0:16}" $((16#${STOP:16:8} + 2)))
pb_log "backup $F: WAL $START..$STOP; removing $GAP, then $START"

# del_wal NAME: remove the archived object of a WAL segment.
del_wal() {
    if [ "$PB_REPO_KIND" = s3 ]; then
        AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
            python3 "$PB_SRCDIR/tests/s3server/s3tool.py" request DELETE \
            "$S3_ENDPOINT/${PB_REPO#s3://}/wal/${1:0:8}/$1.zst" >/dev/null
    else
        rm "$PB_REPO/wal/${1:0:8}/$1.zst"
    fi
}

# refused LABEL SEGMENT RESTORE_ARGS...: the restore fails naming SEGMENT, writes nothing.
refused() {
    local label=$1 seg=$2
    shift 2
    pb_refused "$label" "WAL segment $seg .*is missing.*nothing was written" "$@"
}

# 1. A gap after the backup.
pb_check "remove $GAP from the repository" del_wal "$GAP"
refused "an LSN target past the gap is refused" "$GAP" --target-lsn "$LSN"
pb_check "verify of the backup passes (its own WAL is complete)" pb verify --set "$F"
mkdir -p "$PB_WORK/w" && _pb_chown_pg "$PB_WORK/w"
out=$(pb restore --target-dir "$PB_WORK/w" --target-time "$NOW" 2>&1)
if grep -q "WAL segment $GAP is missing .*later WAL is archived" <<<"$out"; then
    pb_test_ok "a time target warns that replay stops at the gap"
else
    pb_test_fail "no warning about the gap for a time target: $out"
fi
rm -rf "$PB_WORK/w"
pb_restore_digest "a restore to the backup's end does not need the gap and works" \
    "restore to the backup's end failed" "$PB_WORK/r1" "$DIGEST" --set "$F"

# 2. A segment inside the backup's window.
pb_check "remove $START from the repository" del_wal "$START"
refused "restore to the backup's end is refused" "$START" --set "$F"
refused "restore with a time target is refused" "$START" --target-time "$NOW"
out=$(pb verify --set "$F" 2>&1)
if [ $? != 0 ] && grep -q "$START" <<<"$out"; then
    pb_test_ok "verify fails naming $START"
else
    pb_test_fail "verify with $START missing: $out"
fi
pb_test_summary
