#!/bin/bash
# Disk full on the repository: a size-limited file system (tmpfs, made and removed by
# this test) holds the repository. With the space used up:
#   backup        fails (non-zero) with a message naming the object and ENOSPC; the
#                 repository stays consistent (earlier backups verify, no partial backup
#                 visible, nothing left behind)
#   archive-push  fails (non-zero) and loses nothing: the segment stays in pg_wal, ready,
#                 and PostgreSQL retries it
# Once space is back both succeed, and the new backup restores byte-exact.
# tmpfs pages are charged to the memory cgroup of the writer: the file system is kept
# small (PB_DISK_FULL_MB, default 48).
source "$(dirname "$0")/pb_lib.sh"
if [ "$PB_REPO_KIND" != posix ] || [ "$(id -u)" != 0 ]; then
    echo "disk full needs a posix repository and root (to mount a small file system)"
    echo "0 passed, 0 failed"
    exit 0
fi
pb_setup
MNT=$PB_REPO
mount -t tmpfs -o "size=${PB_DISK_FULL_MB:-48}m,mode=0755" pageback-disk-full "$MNT" ||
    pb_die "cannot mount a tmpfs at $MNT"
# Stop the clusters (they archive into the mount) before unmounting, then clean up.
trap '_pb_rc=$?; for d in "${_PB_CLUSTERS[@]}"; do
        _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1; done
      umount "$MNT" 2>/dev/null || umount -l "$MNT"; (exit $_pb_rc); _pb_cleanup' EXIT
_pb_chown_pg "$MNT"

pb_source_pgbench 1

listed() { ls "$PB_REPO"/backup/*/manifest 2>/dev/null | awk -F/ '{print $(NF-1)}'; }
leftovers() {
    local out d
    out=$(find "$PB_REPO" -name '*.tmp.*' -printf '%P ' 2>/dev/null)
    for d in "$PB_REPO"/backup/*/; do
        [ -d "$d" ] && [ ! -f "$d/manifest" ] && out+="${d#"$PB_REPO"/}(no manifest) "
    done
    echo "$out"
}
ready() { ls "$SRC"/pg_wal/archive_status/ 2>/dev/null | sed -n 's/\.ready$//p'; }
wait_no_ready() {
    local i
    for i in $(seq 1 300); do
        [ -z "$(ready)" ] && return 0
        # the archiver waits up to a minute after three failed attempts: wake it
        [ $((i % 20)) = 0 ] && pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
        sleep 0.1
    done
    return 1
}

pb_check "full backup while there is space" pb backup --type full
GOOD=$(listed | tail -n 1)
wait_no_ready

# Use up the space: a filler file, then give back a little (less than a backup needs).
dd if=/dev/zero of="$MNT/filler" bs=1M status=none 2>/dev/null
truncate -s -256K "$MNT/filler"
FREE=$(df -k --output=avail "$MNT" | tail -n 1)
pb_log "repository file system: ${FREE} KiB free"

# backup: fails cleanly
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1" >/dev/null
OUT=$(pb backup --type full --wal-timeout 20 2>&1)
RC=$?
pb_assert_ne "$RC" 0 "backup on a full repository fails (exit $RC)"
if echo "$OUT" | grep -q "No space left on device" &&
    echo "$OUT" | grep -Eq "backup/[0-9]{8}-[0-9]{6}[FIS](-[0-9a-f-]+)?/(pack/[0-9]+|manifest)"; then
    pb_test_ok "the message names the object and ENOSPC: $(echo "$OUT" | grep 'No space' | head -n 1)"
else
    pb_test_fail "the message should name the object and ENOSPC: $(echo "$OUT" | tail -n 2)"
fi
pb_assert_eq "$(listed | tr '\n' ' ')" "$GOOD " "no partial backup is visible"
pb_assert_eq "$(leftovers)" "" "the failed backup left no temp object and no backup directory"
pb_check "the earlier backup still verifies" pb verify --set "$GOOD"

# archive-push: fails and loses nothing
pg_psql "$SRC" "INSERT INTO pgbench_history SELECT 1, 1, aid, 1, now() FROM generate_series(1, 50000) aid" >/dev/null
SEG=$(pg_psql "$SRC" "SELECT pg_walfile_name(pg_current_wal_lsn())")
pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
cp "$SRC/pg_wal/$SEG" "$PB_WORK/$SEG.copy"
for i in $(seq 1 100); do
    [ "$(pg_psql "$SRC" "SELECT failed_count > 0 FROM pg_stat_archiver")" = t ] && break
    sleep 0.1
done
pb_assert_eq "$(pg_psql "$SRC" "SELECT failed_count > 0 FROM pg_stat_archiver")" t \
    "PostgreSQL's archive_command (archive-push) fails on a full repository"
pb_check "segment $SEG stays in pg_wal, ready to be archived again" \
    test -f "$SRC/pg_wal/archive_status/$SEG.ready" -a -f "$SRC/pg_wal/$SEG"
OUT=$(_pb_as_pg "$PB_BIN" archive-push "$SRC/pg_wal/$SEG" --repo "$PB_REPO" 2>&1)
RC=$?
pb_assert_ne "$RC" 0 "archive-push run by hand fails too (exit $RC)"
if echo "$OUT" | grep -q "No space left on device" && echo "$OUT" | grep -q "$SEG"; then
    pb_test_ok "the message names the segment and ENOSPC"
else
    pb_test_fail "the message should name $SEG and ENOSPC: $OUT"
fi
pb_assert_eq "$(ls "$PB_REPO"/wal/*/ | grep -c "$SEG")" 0 "nothing of $SEG is in the repository"

# space is back: both succeed
rm -f "$MNT/filler"
pb_check "PostgreSQL's retry archives every waiting segment" wait_no_ready
if "$PB_BIN" archive-get "$SEG" "$PB_WORK/$SEG.got" --repo "$PB_REPO" >/dev/null 2>&1 &&
    cmp -s "$PB_WORK/$SEG.got" "$PB_WORK/$SEG.copy"; then
    pb_test_ok "$SEG is archived byte-exact"
else
    pb_test_fail "$SEG is not archived as it was in pg_wal"
fi
pb_check "backup succeeds once space is back" pb backup
NEW=$(listed | tail -n 1)
pb_assert_ne "$NEW" "$GOOD" "a new backup is listed"
pb_check "verify of the new backup" pb verify --set "$NEW"
pb_assert_eq "$(leftovers)" "" "no leftovers in the repository"
WANT=$(pg_digest_all "$SRC")
pb_restore_digest "the new backup restores byte-exact" "restore of $NEW" \
    "$PB_WORK/restored" "$WANT" --set "$NEW"
pb_test_summary
