#!/bin/bash
# The restore target's safety: a delta restore never writes through links it did not
# create (base/<db> and pg_wal pointing outside the target: the outside stays
# byte-for-byte untouched and the restored cluster is correct), and a target whose
# postmaster.pid names a live process is refused with --delta and --force alike,
# nothing touched; a delta restore into a fresh target on the source's host without
# --tablespace-map is refused (it would write into the running source's tablespace)
# and works with the map. Small cluster (pgbench -s 1) to stay fast.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 1
mkdir -p "$PB_WORK/ts1" "$PB_WORK/ts-r" && _pb_chown_pg "$PB_WORK/ts1" && _pb_chown_pg "$PB_WORK/ts-r"
pg_psql "$SRC" "CREATE TABLESPACE ts1 LOCATION '$PB_WORK/ts1'" >/dev/null
pg_psql "$SRC" "CREATE TABLE in_ts TABLESPACE ts1 AS SELECT g AS id FROM generate_series(1, 1000) g" \
    >/dev/null
TSOID=$(pg_psql "$SRC" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")
TSMAP=(--tablespace-map "$TSOID=$PB_WORK/ts-r")
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb backup --type full >"$PB_WORK/backup.out" 2>&1 || { cat "$PB_WORK/backup.out"; pb_die "backup failed"; }
DIGEST=$(pg_digest_all "$SRC")
DBOID=$(pg_psql "$SRC" "SELECT oid FROM pg_database WHERE datname = 'postgres'")
R=$PB_WORK/r

# tree_sum DIR: every entry's type, mode and size, and every file's content.
tree_sum() {
    (cd "$1" && find . -printf '%p %y %m %s %l\n' | sort &&
        find . -type f -print0 | sort -z | xargs -0 -r sha256sum) | sha256sum
}

# restored_ok WHAT [DIR]: the cluster in DIR ($R) starts, recovers, and holds the
# source's data.
restored_ok() {
    local R=${2:-$R}
    if ! { pg_reconfigure "$R" && pg_conf "$R" "archive_mode = off" && pg_start "$R" &&
        pb_wait_recovery "$R"; }; then
        pb_test_fail "$1: restored cluster does not start"
        pg_is_running "$R" && pg_stop "$R"
        return 1
    fi
    pb_assert_eq "$(pg_digest_all "$R")" "$DIGEST" "$1: table digests equal to the source"
    pg_stop "$R"
}

delta() {
    pb restore --target-dir "$R" --delta "${TSMAP[@]}" >"$PB_WORK/restore.out" 2>&1 ||
        { cat "$PB_WORK/restore.out" >&2; return 1; }
}

if pb_restore_start "$R" "${TSMAP[@]}"; then
    pb_assert_eq "$(pg_digest_all "$R")" "$DIGEST" "first restore: digests equal"
    pg_stop "$R"
else
    pb_test_fail "first restore"
fi

# Another major version's directory in the tablespace location (they share it, each
# in its own PG_<version>_<catversion>) is not the restore's to prune.
mkdir -p "$PB_WORK/ts-r/PG_99_209901011" && echo other >"$PB_WORK/ts-r/PG_99_209901011/f" &&
    chown -R postgres: "$PB_WORK/ts-r/PG_99_209901011"
OTHER=$(tree_sum "$PB_WORK/ts-r/PG_99_209901011")
pb_check "plain delta restore" delta
pb_assert_eq "$(tree_sum "$PB_WORK/ts-r/PG_99_209901011")" "$OTHER" \
    "another version's directory in the tablespace location: kept"

# (d) A live server's pid file (the running source's) in the target: refused, untouched.
cp "$SRC/postmaster.pid" "$R/postmaster.pid" && _pb_chown_pg "$R/postmaster.pid"
SRCPID=$(head -n 1 "$SRC/postmaster.pid")
BEFORE=$(tree_sum "$R")
for mode in --delta --force; do
    if pb restore --target-dir "$R" $mode "${TSMAP[@]}" >"$PB_WORK/live.out" 2>&1; then
        pb_test_fail "restore $mode into a target with a live postmaster.pid succeeded"
    else
        pb_check "restore $mode refused naming postmaster.pid and PID $SRCPID" \
            grep -q "postmaster.pid names PID $SRCPID" "$PB_WORK/live.out"
    fi
    pb_assert_eq "$(tree_sum "$R")" "$BEFORE" "restore $mode with a live pid: target untouched"
done
pg_is_running "$SRC" && pb_test_ok "the source cluster still runs" ||
    pb_test_fail "the source cluster stopped"
# A stale pid file (a process that has exited) does not stop a delta restore.
(exit 0) &
wait $!
echo "$!" >"$R/postmaster.pid"

# (a) base/<db> is a link to a directory outside the target, whose relation files
# differ from the backup (one page damaged) and which holds a canary.
OUT_BASE=$PB_WORK/outside-base
mv "$R/base/$DBOID" "$OUT_BASE" && ln -s "$OUT_BASE" "$R/base/$DBOID" &&
    echo canary >"$OUT_BASE/canary" && chown -h postgres: "$R/base/$DBOID" "$OUT_BASE/canary"
REL=$(pg_psql "$SRC" "SELECT relfilenode FROM pg_class WHERE relname = 'pgbench_accounts'")
printf 'XXXXXXXX' | dd of="$OUT_BASE/$REL" bs=1 seek=4000 conv=notrunc status=none
BEFORE=$(tree_sum "$OUT_BASE")
if delta; then
    pb_test_ok "delta restore with base/$DBOID a link outside"
else
    pb_test_fail "delta restore with base/$DBOID a link outside"
fi
pb_assert_eq "$(tree_sum "$OUT_BASE")" "$BEFORE" "outside base/$DBOID: untouched"
[ -d "$R/base/$DBOID" ] && [ ! -L "$R/base/$DBOID" ] &&
    pb_test_ok "base/$DBOID is a real directory again" ||
    pb_test_fail "base/$DBOID is not a real directory"
restored_ok "delta over a base/$DBOID link"

# (b) pg_wal is a link outside (initdb -X style) while the source had a plain pg_wal:
# the link is replaced by a directory as in the backup, the outside stays as it was
# (its segments belong to the old cluster and must not be mixed into recovery).
OUT_WAL=$PB_WORK/outside-wal
mv "$R/pg_wal" "$OUT_WAL" && ln -s "$OUT_WAL" "$R/pg_wal" && chmod 0750 "$OUT_WAL" &&
    echo canary >"$OUT_WAL/canary" && chown -h postgres: "$R/pg_wal" "$OUT_WAL/canary"
BEFORE=$(tree_sum "$OUT_WAL")
if delta; then
    pb_test_ok "delta restore with pg_wal a link outside"
else
    pb_test_fail "delta restore with pg_wal a link outside"
fi
pb_assert_eq "$(tree_sum "$OUT_WAL")" "$BEFORE" "outside pg_wal: untouched"
[ -d "$R/pg_wal" ] && [ ! -L "$R/pg_wal" ] && [ -d "$R/pg_wal/archive_status" ] &&
    pb_test_ok "pg_wal is a real directory with archive_status" ||
    pb_test_fail "pg_wal is not a real directory"
grep -q "pg_wal is a symbolic link to $OUT_WAL" "$PB_WORK/restore.out" &&
    pb_test_ok "the replaced pg_wal link is reported" || pb_test_fail "no word on the pg_wal link"
restored_ok "delta over a pg_wal link"

# (e) The source runs on this host, its tablespace ts1 in $PB_WORK/ts1. A delta restore
# into a fresh target without --tablespace-map would link pg_tblspc/$TSOID to that
# live directory and write and prune in it: refused, naming the OID, the directory and
# the way out, the live tablespace untouched (its file list, and a canary the backup
# does not hold, which a prune would remove). With the map the restore works.
pg_psql "$SRC" "ALTER TABLE in_ts SET (autovacuum_enabled = off)" >/dev/null &&
    pg_psql "$SRC" "VACUUM in_ts" >/dev/null && pg_psql "$SRC" "CHECKPOINT" >/dev/null
TSDIR=$(ls -d "$PB_WORK"/ts1/PG_15_*)
echo canary >"$TSDIR/pb_canary" && _pb_chown_pg "$TSDIR/pb_canary"
ts_list() { (cd "$PB_WORK/ts1" && find . -printf '%p %y %s\n' | sort) | sha256sum; }
LIVE=$(ts_list)
R2=$PB_WORK/r2
mkdir -p "$R2" "$PB_WORK/ts-r2" && _pb_chown_pg "$R2" && _pb_chown_pg "$PB_WORK/ts-r2"
if pb restore --target-dir "$R2" --delta >"$PB_WORK/ts.out" 2>&1; then
    pb_test_fail "delta restore into a fresh target without --tablespace-map succeeded"
else
    pb_check "delta restore without --tablespace-map refused, naming tablespace $TSOID, \
its directory and --tablespace-map" grep -q \
        "tablespace $TSOID: directory $PB_WORK/ts1 .*--tablespace-map $TSOID=DIR" "$PB_WORK/ts.out"
fi
pb_assert_eq "$(ts_list)" "$LIVE" "refused: the live source tablespace's files are untouched"
pb_assert_eq "$(cat "$TSDIR/pb_canary")" canary "refused: the live tablespace's canary is kept"
pb_assert_eq "$(ls -A "$R2")" "" "refused: the target is still empty"
if pb restore --target-dir "$R2" --delta --tablespace-map "$TSOID=$PB_WORK/ts-r2" \
    >"$PB_WORK/ts.out" 2>&1; then
    pb_test_ok "delta restore into a fresh target with --tablespace-map"
else
    cat "$PB_WORK/ts.out" >&2
    pb_test_fail "delta restore into a fresh target with --tablespace-map"
fi
pb_assert_eq "$(readlink "$R2/pg_tblspc/$TSOID")" "$PB_WORK/ts-r2" \
    "pg_tblspc/$TSOID points at the mapped directory"
pb_assert_eq "$(ts_list)" "$LIVE" "mapped: the live source tablespace's files are untouched"
pb_assert_eq "$(cat "$TSDIR/pb_canary")" canary "mapped: the live tablespace's canary is kept"
restored_ok "delta into a fresh target with --tablespace-map" "$R2"
pb_test_summary
