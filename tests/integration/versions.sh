#!/bin/bash
# One supported PostgreSQL major end to end, on the real server binaries in PB_PGBIN
# (tools/pgversions.sh installs 14, 16, 17 and 18 for tools/check's version matrix; the
# default is the host's 15): the PostgreSQL session's calls (pgconn_probe); a full
# backup; WAL-guided incrementals (read mode wal, no fallback) over a new database and
# changed rows, the second a verify scan that finds no missed page; the chain restored,
# started with the same binaries and compared by digest with the source; the restore
# points the archived WAL holds; point-in-time restores to a name, an xid, a time and an
# LSN; a backup of a streaming standby restored and compared; a promoted copy's
# timeline 2 backed up and restored to points on it, one across the switch; on 17 and
# later, an incremental read by the server's WAL summaries (summarize_wal), verified and
# restored. What PB_PGBIN lacks (pg_checksums) is skipped with a printed note.
# A native build with every client and contrib (tools/pgnative.sh, not in tools/check's
# default matrix): PB_PGBIN=$(tools/pgversions.sh native 18) bash tests/integration/versions.sh
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" || pb_die "initdb failed ($PB_PGBIN)"
# A standby cannot switch WAL segments: the segment holding its backup's end reaches the
# archive when the primary finishes it, which archive_timeout bounds while the primary
# writes (the standby's backup runs under pb_while_writing).
pg_conf "$SRC" "track_commit_timestamp = on" "autovacuum = off" "archive_timeout = 1s" \
    "wal_keep_size = 256MB"
pg_start "$SRC" || pb_die "source cluster did not start ($PB_PGBIN)"
pg_env "$SRC"
q() { pg_psql "${DB:-$SRC}" "$1"; }
VNUM=$(q "SHOW server_version_num")
pb_log "PostgreSQL $(q "SHOW server_version") ($VNUM) from $PB_PGBIN"
# engine/pg/pgconn.c on this major: every pgc_ call (the backup start and stop SQL among
# them) checked against plain SQL by the pgconn_probe runner built beside PB_BIN.
PROBE=$(dirname "$PB_BIN")/tests/unit/engine/pg/pgconn_probe
if [ -x "$PROBE" ]; then
    out=$(PB_TEST_PGLOG=$(pg_logfile "$SRC") "$PROBE" \
        "host=$(pg_sockdir "$SRC") port=$(pg_port "$SRC") user=postgres dbname=postgres" 2>&1)
    rc=$?
    pb_check "pgconn_probe: $(tail -n 1 <<<"$out")" test "$rc" = 0 ||
        grep -E "^FAIL|pgc_" <<<"$out" | head -n 10
else
    pb_test_fail "no pgconn_probe beside $PB_BIN"
fi
pgbench_init "$SRC" 1 || pb_die "pgbench init failed"
q "CREATE TABLE t (id bigserial PRIMARY KEY, ts timestamptz, txid bigint, tag text)" >/dev/null
pb_ins_procedure "$SRC" "ts, txid, tag" "clock_timestamp(), txid_current(), tg" 0.01

# mark NAME: rows; for the last one (id K_NAME) its commit time (T_NAME), the WAL position
# after it (L_NAME) and its xid (X_NAME); restore point rp_NAME; then more rows.
mark() {
    local n=$1 k
    q "CALL ins(5, '$n')" >/dev/null
    k=$(q "SELECT max(id) FROM t")
    printf -v "K_$n" %s "$k"
    printf -v "T_$n" %s "$(PGTZ=UTC q "SELECT pg_xact_commit_timestamp(xmin) FROM t WHERE id = $k")"
    printf -v "L_$n" %s "$(q "SELECT pg_current_wal_lsn()")"
    printf -v "X_$n" %s "$(q "SELECT txid FROM t WHERE id = $k")"
    q "SELECT pg_create_restore_point('rp_$n')" >/dev/null
    sleep 0.3
    q "CALL ins(5, '$n-after')" >/dev/null
}
backup() { pb_backup_logged "$@" && pb_next_second; }
# The id of the backup just made (info lists backups by chain, not by age).
made_id() { sed -n 's/^backup \([^ ]*\) (.*complete.*/\1/p' "$PB_WORK/backup.out"; }
field() { pb_info_field "$1" "$2"; }
# archive DIR: pb_archive_all, after one WAL record: archive_timeout may have left the
# current segment empty, and pg_switch_wal() does not close an empty segment.
archive() {
    pg_psql "$1" "SELECT pg_logical_emit_message(false, 'versions.sh', 'archive')" >/dev/null &&
        pb_archive_all "$1"
}
# check_copy LABEL DIR DIGEST: a started copy holds DIGEST, passes amcheck; stopped, its
# checksums verify (each skipped with a note when PB_PGBIN lacks the tool).
check_copy() {
    pb_assert_eq "$(pg_digest_all "$2")" "$3" "$1: digests equal the source's"
    checked "$1: amcheck" pg_amcheck_all "$2"
    pg_stop "$2"
    checked "$1: page checksums" pg_checksums_check "$2"
}
# checked LABEL CMD...: one check; one the helper skipped (its "note:" line: PB_PGBIN
# lacks the tool) is shown and counted in SKIPPED, neither passed nor failed.
SKIPPED=0
checked() {
    local label=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" = 0 ] && [[ $out == note:* ]]; then
        echo "$out"
        SKIPPED=$((SKIPPED + 1))
        return 0
    fi
    [ -z "$out" ] || echo "$out" >&2
    [ "$rc" = 0 ] && pb_test_ok "$label" || pb_test_fail "$label"
}

# ---- a full and two WAL-guided incrementals
q "CALL ins(10, 'start')" >/dev/null
pb_check "full backup" backup --type full
F1=$(made_id)
pb_assert_eq "$(field "$F1" pg_version)" "$VNUM" "the backup records server version $VNUM"
mark A
q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = 0" >/dev/null
q "CREATE DATABASE db1" >/dev/null
pg_psql "$SRC" "CREATE TABLE d AS SELECT g FROM generate_series(1, 3000) g" db1 >/dev/null
pb_check "WAL-guided incremental" backup --type incr --incremental-mode wal --verify-scan 0
I1=$(made_id)
pb_assert_eq "$(field "$I1" read_mode)" wal "the incremental read in mode wal (no fallback)"
pb_check "the WAL window was decoded" grep -q "WAL window: .* distinct blocks named" \
    "$PB_WORK/backup.out"
if [ "$VNUM" -ge 170000 ]; then
    pb_check "the WAL summaries were not used, saying why (summarize_wal is off)" \
        grep -q "WAL summaries not used: summarize_wal is off" "$PB_WORK/backup.out"
fi
mark B
q "UPDATE pgbench_accounts SET abalance = abalance - 1 WHERE aid % 70 = 0" >/dev/null
pg_psql "$SRC" "UPDATE d SET g = -g WHERE g % 9 = 0" db1 >/dev/null
pb_check "WAL-guided incremental with a verify scan" \
    backup --type incr --incremental-mode wal --verify-scan 1
I2=$(made_id)
DIGEST_I2=$(pg_digest_all "$SRC")
pb_assert_eq "$(field "$I2" verify_scan) $(field "$I2" pages_missed)" "True 0" \
    "the verify scan found no page the WAL-guided reads missed"
mark C
pb_check "source WAL archived" archive "$SRC"

# ---- the chain restored; the WAL's restore points; point-in-time restores
d=$PB_WORK/chain
if pb_restore_start "$d" --set "$I2"; then
    check_copy "chain restore of $I2" "$d" "$DIGEST_I2"
else
    pb_test_fail "chain restore of $I2"
fi
pb_rm_bg "$d"
RP=$(pb info --restore-points 2>&1)
for n in A B C; do
    pb_check "info --restore-points lists rp_$n" grep -q "rp_$n" <<<"$RP"
done
expect() { pb_rows "$SRC" "$1"; }
pb_pitr "restore point name" "$(expect "$K_A")" "$F1" --target-name rp_A
pb_pitr "transaction id" "$(expect "$K_B")" "$I1" --target-xid "$X_B"
pb_pitr "time" "$(expect "$K_C")" "$I2" --target-time "$T_C"
pb_pitr "LSN" "$(expect "$K_B")" "$I1" --target-lsn "$L_B"

# ---- a streaming standby made from the chain; a backup of it restored
STB=$PB_WORK/standby
mkdir -p "$STB" && chmod 0700 "$STB" && _pb_chown_pg "$STB"
pb restore --target-dir "$STB" --target-end >"$PB_WORK/restore.out" 2>&1 ||
    { cat "$PB_WORK/restore.out"; pb_die "restore for the standby failed"; }
rm -f "$STB/recovery.signal" && touch "$STB/standby.signal" && _pb_chown_pg "$STB"
pg_reconfigure "$STB" && pg_conf "$STB" "archive_mode = off" \
    "primary_conninfo = 'host=$(pg_sockdir "$SRC") port=$(pg_port "$SRC") user=postgres'" &&
    pg_start "$STB" || pb_die "the standby did not start"
pb_assert_eq "$(pg_psql "$STB" 'SELECT pg_is_in_recovery()')" t "the standby is in recovery"
q "CALL ins(5, 'standby')" >/dev/null
# The rows, then a segment switch as the primary's last record, replayed: the standby's
# backup then mostly ends at the segment boundary, where it needs the primary's next
# segment too (engine/backup/backup_wal_wait.c, bk_last_needed_lsn).
q "SELECT pg_switch_wal()" >/dev/null
WANT=$(q "SELECT pg_current_wal_lsn()")
for i in $(seq 1 300); do
    [ "$(pg_psql "$STB" "SELECT pg_last_wal_replay_lsn() >= '$WANT'")" = t ] && break
    sleep 0.1
done
DIGEST_S=$(pg_digest_all "$SRC")
pg_env "$STB"
pb_check "full backup of the standby" pb_while_writing "$SRC" backup --type full
S1=$(made_id)
pg_env "$SRC"
# The standby's backup may end exactly where a segment switch left off (its minimum
# recovery point); PostgreSQL 14's recovery reads the record after it before it calls
# the end of the backup reached, so the primary's next segment must be archived too.
pb_check "the primary's WAL after the standby's backup archived" archive "$SRC"
d=$PB_WORK/from-standby
if pb_restore_start "$d" --set "$S1"; then
    check_copy "restore of the standby's backup $S1" "$d" "$DIGEST_S"
else
    pb_test_fail "restore of the standby's backup $S1"
fi
pb_rm_bg "$d"
pg_stop "$STB"

# ---- timeline 2: a copy restored to rp_C and promoted archives into the same repository
R=$PB_WORK/promoted
mkdir -p "$R" && chmod 0700 "$R" && _pb_chown_pg "$R"
pb restore --target-dir "$R" --target-name rp_C --archive-mode preserve >"$PB_WORK/restore.out" 2>&1 ||
    { cat "$PB_WORK/restore.out"; pb_die "restore to rp_C failed"; }
pg_reconfigure "$R" && pg_conf "$R" "archive_mode = on" \
    "archive_command = '${PB_ARCHIVE_COMMAND//\'/\'\'}'" || pb_die "cannot configure $R"
pg_start "$R" && pb_wait_recovery "$R" || pb_die "the restored cluster did not promote"
pg_stop "$SRC"
DB=$R
pg_env "$R"
pb_assert_eq "$(q "SELECT timeline_id FROM pg_control_checkpoint()")" 2 "promoted to timeline 2"
mark D
pb_check "backup on timeline 2" backup
F2=$(made_id)
pb_assert_eq "$(field "$F2" timeline) $(field "$F2" type)" "2 full" \
    "the backup on timeline 2 starts a new chain"
mark E
pb_check "timeline 2's WAL archived" archive "$R"
pb_pitr "restore point on timeline 2" "$(pb_rows "$R" "$K_E")" "$F2" --target-name rp_E
pb_pitr "LSN on timeline 2 from the timeline 1 backup, across the switch" \
    "$(pb_rows "$R" "$K_D")" "$I2" --target-lsn "$L_D" --target-timeline 2

# ---- PostgreSQL 17 on: the server's WAL summaries as the changed-block list
if [ "$VNUM" -ge 170000 ]; then
    q "ALTER SYSTEM SET summarize_wal = on" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
    q "CALL ins(5, 'summaries-on')" >/dev/null
    # The first window may begin before the summarizer did: either way it is backed up.
    pb_check "incremental after summarize_wal = on" \
        backup --type incr --incremental-mode wal --verify-scan 0
    q "UPDATE pgbench_accounts SET abalance = abalance + 3 WHERE aid % 40 = 0" >/dev/null
    q "CREATE DATABASE db2" >/dev/null
    pg_psql "$R" "CREATE TABLE d2 AS SELECT g FROM generate_series(1, 2000) g" db2 >/dev/null
    q "CALL ins(5, 'summaries')" >/dev/null
    pb_check "incremental read by WAL summaries, with a verify scan" \
        backup --type incr --incremental-mode wal --verify-scan 1
    U1=$(made_id)
    DIGEST_U1=$(pg_digest_all "$R")
    pb_assert_eq "$(field "$U1" read_mode) $(field "$U1" pages_missed)" "summaries 0" \
        "read mode summaries; the verify scan found no page they missed"
    pb_check "info --json says read_mode summaries" \
        grep -q '"read_mode": "summaries"' <<<"$(pb info --json)"
    pb_check "timeline 2's WAL archived" archive "$R"
    d=$PB_WORK/summaries
    if pb_restore_start "$d" --set "$U1"; then
        check_copy "restore of $U1 (read by WAL summaries)" "$d" "$DIGEST_U1"
    else
        pb_test_fail "restore of $U1 (read by WAL summaries)"
    fi
    pb_rm_bg "$d"
    # Scattered rows (a page or two each): the summaries name every changed block, and
    # only those are read, with no WAL downloaded or decoded.
    q "UPDATE pgbench_accounts SET abalance = abalance + 1
       WHERE aid IN (SELECT 1 + (g * 7919) % 100000 FROM generate_series(1, 300) g)" >/dev/null
    pb_check "incremental of scattered rows read by WAL summaries" \
        backup --type incr --incremental-mode wal --verify-scan 0
    U2=$(made_id)
    SCANNED=$(field "$U2" pages_scanned) CHANGED=$(field "$U2" pages_changed)
    pb_check "WAL summaries: $SCANNED pages read for $CHANGED changed (at most 1.1x)" \
        test "$((SCANNED * 10))" -le "$((CHANGED * 11))"
    pb_check "WAL summaries: no WAL window decoded" \
        bash -c '! grep -q "WAL window:" "$1"' _ "$PB_WORK/backup.out"
fi
pg_stop "$R"
pb_log "PostgreSQL $VNUM: $SKIPPED checks skipped for what $PB_PGBIN lacks"
pb_test_summary
