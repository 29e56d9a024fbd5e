#!/bin/bash
# Offline rewrites that WAL cannot see. pg_checksums --enable on the stopped cluster
# rewrites every page without WAL: the next incremental (default mode) sees that
# pg_control's data checksum version no longer follows its parent's stop point, reads
# every page by hash, says why (log, info's read_why), and its restore starts, passes
# pg_checksums --check and equals the source. pg_resetwal on the stopped cluster: the
# next incremental does not trust the WAL window either, and its restore is right.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" --no-checksums && pg_conf "$SRC" "autovacuum = off" && pg_start "$SRC" ||
    pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" 1 || pb_die "pgbench init failed"
psql_src() { pg_psql "$SRC" "$@" >/dev/null; }
pb_backup_logged --checkpoint fast --type full || pb_die "full backup failed"

# incremental LABEL: a default incremental; LAST its id, OUT its output.
incremental() {
    OUT=$(pb backup --checkpoint fast 2>&1) || { echo "$OUT" | tail -n 5 >&2;
        pb_test_fail "$1: the incremental failed"; return 1; }
    grep -E "WARN" <<<"$OUT" >&2
    LAST=$(pb_last_id)
    pb_assert_eq "${LAST:15:1}" I "$1: an incremental was taken"
}
# restore_check LABEL: restore LAST, start it, compare with the source, stop it and check
# every page's checksum offline.
restore_check() {
    local d=$PB_WORK/r-$LAST want
    want=$(pg_digest_all "$SRC")
    if pb_restore_start "$d" --set "$LAST"; then
        pb_assert_eq "$(pg_digest_all "$d")" "$want" "$1: the restored copy equals the source"
        pg_stop "$d"
        pb_check "$1: every page of the restored copy passes pg_checksums --check" \
            pg_checksums_check "$d"
    else
        pb_test_fail "$1: the restored copy did not start"
    fi
    pb_rm_bg "$d"
}
# offline LABEL CMD...: run CMD as postgres on the stopped source, then start it again.
offline() {
    local label=$1
    shift
    pg_stop "$SRC" || pb_die "stop"
    _pb_as_pg "$@" >"$PB_WORK/offline.out" 2>&1 || { cat "$PB_WORK/offline.out" >&2;
        pb_die "$label failed"; }
    pg_start "$SRC" || pb_die "restart after $label"
}

offline pg_checksums "$PB_PGBIN/pg_checksums" --enable -D "$SRC"
psql_src "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 200"
if incremental "checksums enabled offline"; then
    pb_check "checksums enabled offline: one log line says pg_control does not follow" \
        grep -q "pg_control does not follow the parent's stop point: the data checksum version changed from 0 to 1" \
        <<<"$OUT"
    pb_assert_eq "$(pb_info_field "$LAST" read_mode)" scan \
        "checksums enabled offline: every page read by hash"
    pb_check "checksums enabled offline: info says why" \
        grep -q "data checksum version changed from 0 to 1" <<<"$(pb_info_field "$LAST" read_why)"
    restore_check "checksums enabled offline"
fi

# The next one follows its parent again: WAL-guided once more.
psql_src "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 200"
if incremental "after the rewrite"; then
    pb_assert_eq "$(pb_info_field "$LAST" read_mode)" wal \
        "after the rewrite: the next incremental trusts WAL again"
    restore_check "after the rewrite"
fi

offline pg_resetwal "$PB_PGBIN/pg_resetwal" -D "$SRC"
psql_src "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 200"
if incremental "pg_resetwal"; then
    pb_assert_ne "$(pb_info_field "$LAST" read_mode)" wal \
        "pg_resetwal: the WAL window is not trusted"
    pb_check "pg_resetwal: info says why" test -n "$(pb_info_field "$LAST" read_why)"
    restore_check "pg_resetwal"
fi
pb_test_summary
