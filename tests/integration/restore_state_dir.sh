#!/bin/bash
# restore (and info --restore-points) cache what each archived WAL segment holds in the
# state directory, and those findings place xid and name targets: a state directory
# that backup refuses (writable by others, another user's) is refused by them too, and
# the cache files are written through mkstemp temporaries (0600, O_EXCL).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster "autovacuum = off"
pg_psql "$SRC" "CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g" >/dev/null
pb_check "full backup" pb_backup_logged --type full --checkpoint fast
pg_psql "$SRC" "INSERT INTO t SELECT g FROM generate_series(1, 500) g" >/dev/null
pg_psql "$SRC" "SELECT pg_create_restore_point('rp1')" >/dev/null
pg_psql "$SRC" "INSERT INTO t SELECT g FROM generate_series(1, 500) g" >/dev/null
pb_check "WAL archived" pb_archive_all "$SRC"
pg_stop "$SRC"

OPEN=$PB_WORK/sd-open FOREIGN=$PB_WORK/sd-root
mkdir -p "$OPEN" "$FOREIGN" && _pb_chown_pg "$OPEN" && chmod 0777 "$OPEN"
chown root:root "$FOREIGN" 2>/dev/null
pb_refused "a world-writable state directory" "state directory .*sd-open is writable by group or others" \
    --state-dir "$OPEN" --target-name rp1
if [ "$(id -u)" = 0 ]; then
    pb_refused "another user's state directory" "state directory .*sd-root belongs to uid 0" \
        --state-dir "$FOREIGN" --target-name rp1
fi
out=$(pb info --restore-points --state-dir "$OPEN" 2>&1) &&
    pb_test_fail "info --restore-points used the world-writable state directory: $out" ||
    { grep -q "writable by group or others" <<<"$out" &&
        pb_test_ok "info --restore-points refuses it too" ||
        pb_test_fail "info --restore-points: $out"; }
pb_assert_eq "$(find "$OPEN" -mindepth 1 | wc -l)" 0 "nothing was written into it"

# The run's own state directory: the target is found, the cache written 0600.
if pb_restore_start "$PB_WORK/copy" --target-name rp1; then
    pb_assert_eq "$(pg_psql "$PB_WORK/copy" "SELECT count(*) FROM t")" 1500 \
        "restore to rp1 through the state directory's cache"
    pg_stop "$PB_WORK/copy"
else
    pb_test_fail "restore to rp1"
fi
cached=$(find "$PB_STATE/walscan" -type f 2>/dev/null)
pb_assert_ne "$cached" "" "the WAL scan cache was written"
pb_assert_eq "$(find "$PB_STATE/walscan" -type f -not -perm 0600 | wc -l)" 0 \
    "cache files are 0600"
pb_assert_eq "$(find "$PB_STATE" -name '*.tmp.*' | wc -l)" 0 "no temporary left"
pb_test_summary
