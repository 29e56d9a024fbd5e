#!/bin/bash
# The segment that holds a WAL-guided incremental's start LSN is read from pg_wal; when a
# checkpoint has recycled it (archived) since pg_backup_start, the guidance reads the
# repository's archive copy instead of calling it a gap and falling back. The backup is
# held (SIGSTOP) right after pg_backup_start, before it decodes; meanwhile the source
# switches, archives and checkpoints until the segment is gone from pg_wal.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
# A slower archive_command keeps the backup waiting for the segment before its start
# (archived after pg_backup_start's switch) long enough to be held before it decodes.
PB_ARCHIVE_COMMAND="sleep 0.5; $PB_ARCHIVE_COMMAND" pg_init_cluster "$SRC" &&
    pg_conf "$SRC" "autovacuum = off" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" 1 || pb_die "pgbench init failed"
psql_src() { pg_psql "$SRC" "$@" >/dev/null; }
pb_backup_logged --checkpoint fast --type full || pb_die "full backup failed"
psql_src "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 300"

# The pageback process below PID (runuser forks it).
pageback_pid() {
    local p c
    for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = pageback ] && { echo "$p"; return; }
        c=$(pageback_pid "$p") && [ -n "$c" ] && { echo "$c"; return; }
    done
    return 1
}

# Resume the held backup and its parent: runuser stops itself when its child stops.
resume() { kill -CONT "$PBPID"; kill -CONT "$RUNUSER" 2>/dev/null; }

OUTF=$PB_WORK/incr.out
pb backup --checkpoint fast >"$OUTF" 2>&1 &
BG=$!
PBPID=
for i in $(seq 1 500); do
    grep -q "checkpoint (fast) took" "$OUTF" && PBPID=$(pageback_pid "$BG") && break
    sleep 0.01
done
[ -n "$PBPID" ] && kill -STOP "$PBPID" || pb_die "the incremental did not reach pg_backup_start"
RUNUSER=$(awk '{print $4}' /proc/"$PBPID"/stat)
if grep -q "WAL window:\|incremental reads" "$OUTF"; then
    resume
    wait "$BG"
    pb_die "the incremental was held too late (it had decoded already)"
fi
SEG=$(pg_psql "$SRC" "SELECT pg_walfile_name(redo_lsn) FROM pg_control_checkpoint()")
for i in $(seq 1 10); do
    [ -e "$SRC/pg_wal/$SEG" ] || break
    psql_src "UPDATE pgbench_branches SET bbalance = bbalance + 1"
    pb_archive_all "$SRC" && psql_src "CHECKPOINT"
done
GONE=no
[ -e "$SRC/pg_wal/$SEG" ] || GONE=yes
resume
wait "$BG"
RC=$?
pb_assert_eq "$GONE" yes "the start segment $SEG was recycled from pg_wal while the backup was held"
pb_assert_eq "$RC" 0 "the incremental completed"
LAST=$(pb_last_id)
pb_check "the start segment is read from the archive, and the log says so" \
    grep -q "WAL segment $SEG is no longer in $SRC/pg_wal: read from the repository's archive" "$OUTF"
pb_check "no fallback to the file-level skip" bash -c "! grep -q 'fall back' '$OUTF'"
pb_assert_eq "$(pb_info_field "$LAST" read_mode)" wal "the incremental is WAL-guided"
WANT=$(pg_digest_all "$SRC")
D=$PB_WORK/restored
if pb_restore_start "$D" --set "$LAST"; then
    pb_assert_eq "$(pg_digest_all "$D")" "$WANT" "the restored incremental equals the source"
    pg_stop "$D"
else
    pb_test_fail "the restored incremental did not start"
fi
pb_test_summary
