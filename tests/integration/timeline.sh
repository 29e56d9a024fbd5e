#!/bin/bash
# Timelines: restore to a restore point and promote (timeline 2), archive the new timeline
# into the same repository, write, back up (a new chain: the timeline changed), and
# restore to points on timeline 2 — from the new backup and, across the timeline switch,
# from the backup taken on timeline 1 — and to points on the abandoned part of
# timeline 1. The old primary writes and archives one more segment after the promotion
# before it is stopped, so timeline 1 always goes on past the branch point: time targets
# past it are placed by reading each timeline's archived WAL.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" || pb_die "initdb failed"
pg_conf "$SRC" "track_commit_timestamp = on"
pg_start "$SRC" || pb_die "source cluster did not start"

q() { pg_psql "$DB" "$1"; }
DB=$SRC
q "CREATE TABLE t (id bigserial PRIMARY KEY, tag text NOT NULL, tli int NOT NULL)" >/dev/null
pb_ins_procedure "$SRC" "tag, tli" "tg, (SELECT timeline_id FROM pg_control_checkpoint())" \
    0.01

# mark NAME: rows, then remember the last id (K_NAME), its commit time (T_NAME), the WAL
# position (L_NAME) and restore point rp_NAME; pause; more rows.
mark() {
    local n=$1 k
    q "CALL ins(5, '$n')" >/dev/null
    k=$(q "SELECT max(id) FROM t")
    printf -v "K_$n" %s "$k"
    printf -v "T_$n" %s "$(PGTZ=UTC q "SELECT pg_xact_commit_timestamp(xmin) FROM t WHERE id = $k")"
    printf -v "L_$n" %s "$(q "SELECT pg_current_wal_lsn()")"
    q "SELECT pg_create_restore_point('rp_$n')" >/dev/null
    sleep 0.3
    q "CALL ins(5, '$n-after')" >/dev/null
}

# Everything the current cluster wrote so far reaches the archive.
archive_all() { pb_archive_all "$DB"; }

# rows DIR [MAX_ID]: the rows' fingerprint, each row's tag included.
PB_PITR_ROW_TEXT="id::text || tag"
rows() { pb_rows "$1" "${2:-}" "$PB_PITR_ROW_TEXT"; }

backup() {
    pb_backup_logged "$@" || return 1
    pb_next_second # stop times are whole seconds: targets below are clearly later
}

# ---- timeline 1: a full backup, then rows and a restore point
pg_env "$SRC"
pb_check "full backup on timeline 1" backup --type full
F1=$(pb_last_id)
q "CALL ins(10, 'A')" >/dev/null
mark A
q "CALL ins(5, 'A2')" >/dev/null
K_A2=$(q "SELECT max(id) FROM t")
T_A2=$(PGTZ=UTC q "SELECT pg_xact_commit_timestamp(xmin) FROM t WHERE id = $K_A2")
L_A2=$(q "SELECT pg_current_wal_lsn()")
q "CALL ins(3, 'A3')" >/dev/null
archive_all || pb_die "WAL of timeline 1 not archived"
EXP_A2=$(rows "$SRC" "$K_A2")

# ---- restore to rp_A and promote; the copy archives into the same repository
R=$PB_WORK/promoted
mkdir -p "$R" && chmod 0700 "$R" && _pb_chown_pg "$R"
if pb restore --target-dir "$R" --target-name rp_A --archive-mode preserve >"$PB_WORK/restore.out" 2>&1; then
    pb_test_ok "restore to rp_A"
else
    cat "$PB_WORK/restore.out"
    pb_die "restore to rp_A failed"
fi
pg_reconfigure "$R" && pg_conf "$R" "archive_mode = on" \
    "archive_command = '${PB_ARCHIVE_COMMAND//\'/\'\'}'" || pb_die "cannot configure $R"
pg_start "$R" && pb_wait_recovery "$R" || pb_die "the restored cluster did not promote"
DB=$R
pb_assert_eq "$(q "SELECT timeline_id FROM pg_control_checkpoint()")" 2 "promoted to timeline 2"
pb_assert_eq "$(rows "$R")" "$(rows "$R" "$K_A")" "the promoted copy holds the rows up to rp_A"
# Both timelines live for a while: rows on timeline 2, then on the old primary (timeline
# 1, T_A4 the time of its first row there), whose segment after the branch is archived
# before it is retired; its timeline 1 stays in the archive.
q "CALL ins(2, 'P')" >/dev/null
sleep 0.3
DB=$SRC
q "CALL ins(3, 'A4')" >/dev/null
T_A4=$(PGTZ=UTC q "SELECT pg_xact_commit_timestamp(xmin) FROM t WHERE tag = 'A4' ORDER BY id
                   LIMIT 1")
archive_all || pb_die "timeline 1's segment after the branch not archived"
pg_stop "$SRC"
sleep 0.3
DB=$R
pg_env "$R"

# ---- timeline 2: rows, a backup (a new chain), more rows
q "CALL ins(10, 'B')" >/dev/null
mark B
pb_check "backup on timeline 2" backup
F2=$(pb_last_id)
pb_assert_eq "$(pb_info_field "$F2" timeline)" 2 "the new backup is on timeline 2"
pb_assert_eq "$(pb_info_field "$F2" type)" full "a new timeline starts a new chain (full)"
q "CALL ins(10, 'C')" >/dev/null
mark C
archive_all || pb_die "WAL of timeline 2 not archived"
mkdir -p "$PB_WORK/h" && _pb_chown_pg "$PB_WORK/h"
pb_check "00000002.history is archived" pb archive-get 00000002.history "$PB_WORK/h/history"
pb_check "the history names the switch from timeline 1" grep -q "^1" "$PB_WORK/h/history"

# pb_pitr LABEL EXPECTED_ROWS EXPECTED_SET RESTORE_ARGS... (pb_lib.sh)
pb_pitr "restore point on timeline 2 after its backup" "$(rows "$R" "$K_C")" "$F2" \
    --target-name rp_C
pb_pitr "time on timeline 2 before its backup: from timeline 1 across the switch" \
    "$(rows "$R" "$K_B")" "$F1" --target-time "$T_B"
pb_pitr "LSN on timeline 2 before its backup: from timeline 1 across the switch" \
    "$(rows "$R" "$K_B")" "$F1" --target-lsn "$L_B" --target-timeline 2
pb_pitr "time on the abandoned part of timeline 1 (placed by its WAL, no --target-timeline)" \
    "$EXP_A2" "$F1" --target-time "$T_A2"
grep -q "reached after the branch point .* only on timeline 1: replay stops before the commit" \
    "$PB_WORK/restore.out" && pb_test_ok "the restore says timeline 1's WAL holds the time" ||
    pb_test_fail "no INFO line naming the stop on timeline 1: $(cat "$PB_WORK/restore.out")"
pb_pitr "LSN on the abandoned part of timeline 1 (--target-timeline 1)" "$EXP_A2" "$F1" \
    --target-lsn "$L_A2" --target-timeline 1
pb_pitr "end of backup (default timeline handling) of the timeline 1 backup" \
    "$(rows "$R" 0)" "$F1" --set "$F1"

pb_refused "an LSN both timelines' WAL holds past the branch is refused" \
    "archive holds WAL at that LSN on both" --set "$F1" --target-lsn "$L_B"
pb_refused "a time both timelines' WAL reaches past the branch is refused, naming both" \
    "the WAL of both reaches it: recovery would stop at the commit at .* on timeline 1 .* at the commit at .* on timeline 2" \
    --set "$F1" --target-time "$T_A4"
pb_refused "a timeline 2 backup is refused for a timeline 1 target" \
    "timeline 2 is not in the history of target timeline 1" --set "$F2" --target-timeline 1 \
    --target-lsn "$L_C"
pb_test_summary
