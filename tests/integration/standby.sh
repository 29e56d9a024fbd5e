#!/bin/bash
# Backups from a hot standby: a primary archiving into the repository and a streaming
# standby made from it with pg_basebackup -R. While pgbench writes on the primary: a
# full backup from the standby, an incremental from the primary on top of it, a full
# from the primary and an incremental from the standby on top of that (one repository,
# one system identifier, parents chosen by LSN), WAL-guided, then a verify scan on top
# that finds no page the WAL-guided read would have missed. Each but the primary's full (which
# full_backup.sh covers) is restored to a restore point made after the writes and
# compared with the primary there, and checked with amcheck and pg_checksums; the
# standby's incremental also to its own end. The standby's full is taken with replay
# paused: it ends at WAL the standby had replayed; a backup whose end the standby has not
# replayed (a test fault) waits and is refused. Then the standby is promoted: its next
# backup starts a new chain on timeline 2.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
PRI=$PB_WORK/primary
STB=$PB_WORK/standby
pg_init_cluster "$PRI" || pb_die "initdb failed"
# A standby cannot switch WAL segments: the one holding a standby backup's end reaches
# the archive when the primary finishes it, which archive_timeout bounds.
pg_conf "$PRI" "archive_timeout = 1s" "wal_keep_size = 256MB"
pg_start "$PRI" || pb_die "primary did not start"
pgbench_init "$PRI" 1 || pb_die "pgbench init failed"

mkdir -p "$STB" && chmod 0700 "$STB" && _pb_chown_pg "$STB"
_pb_as_pg "$PB_PGBIN/pg_basebackup" -D "$STB" -R -X stream -c fast -h "$(pg_sockdir "$PRI")" \
    -p "$(pg_port "$PRI")" -U postgres >"$PB_WORK/basebackup.out" 2>&1 ||
    { cat "$PB_WORK/basebackup.out"; pb_die "pg_basebackup failed"; }
pg_reconfigure "$STB" && pg_start "$STB" || pb_die "standby did not start"
pb_assert_eq "$(pg_psql "$STB" 'SELECT pg_is_in_recovery()')" t "the standby is in recovery"

# give_up MSG: a step the rest depends on failed; count it and end with the summary.
give_up() {
    pb_test_fail "$1"
    pb_test_summary
    exit 1
}

IDS=()
# backup FROM TYPE ARGS...: a backup of FROM (primary or standby) that must be of TYPE.
backup() {
    local from=$1 want=$2 out id
    shift 2
    pg_env "$from"
    out=$(pb backup "$@" 2>&1)
    local rc=$?
    pg_env "$PRI"
    echo "$out" >"$PB_WORK/backup.out"
    if [ $rc != 0 ]; then
        echo "$out" >&2
        pb_test_fail "backup from $(basename "$from") failed"
        return 1
    fi
    id=$(pb_last_id)
    pb_assert_eq "${id:15:1}" "$want" "backup $id from $(basename "$from") is of type $want"
    IDS+=("$id")
}

# Writes go on until the standby's backups are taken (killed below): a standby backup
# ends at its minimum recovery point, which only moves when the standby flushes pages
# replayed after its parent's end (a quiet primary leaves it behind: refused, retried).
pgbench_run_bg "$PRI" 600 1
sleep 1
# The end of a standby backup is WAL the standby has replayed (engine/backup/backup_standby.c):
# with replay paused while the primary writes on, a full from it ends at or before the
# paused replay LSN, and its log says where replay was.
pg_psql "$STB" "SELECT pg_wal_replay_pause()" >/dev/null
for i in $(seq 1 100); do
    [ "$(pg_psql "$STB" "SELECT pg_get_wal_replay_pause_state()")" = paused ] && break
    sleep 0.1
done
PAUSED=$(pg_psql "$STB" "SELECT pg_last_wal_replay_lsn()")
backup "$STB" F --type full
rc=$?
pg_psql "$STB" "SELECT pg_wal_replay_resume()" >/dev/null
[ $rc = 0 ] || give_up "no full backup from the standby with replay paused"
F_S=${IDS[-1]}
STOP=$(pb_info_field "$F_S" stop_lsn)
pb_assert_eq "$(pg_psql "$STB" "SELECT '$STOP'::pg_lsn <= '$PAUSED'::pg_lsn")" t \
    "the standby's full (replay paused at $PAUSED) ends at $STOP, WAL it had replayed"
pb_check "the backup's log names its end and the replay LSN it was checked against" \
    grep -q "ends at $STOP on timeline 1 (its minimum recovery point; replayed up to $PAUSED)" \
    "$PB_WORK/backup.out"
backup "$PRI" I || give_up "no incremental from the primary"
I_P=${IDS[-1]}
backup "$PRI" F --type full || give_up "no full backup from the primary"
F_P=${IDS[-1]}
backup "$STB" I || give_up "no incremental from the standby"
I_S=${IDS[-1]}
# WAL-guided from the standby, then a verify scan on top that counts what it would miss.
backup "$STB" I --verify-scan 1 || give_up "no verify-scan incremental from the standby"
I_V=${IDS[-1]}
# A standby that has not replayed up to the backup's end (a test fault makes its replay look
# stuck one byte before it): the backup waits --wal-timeout and is refused, naming both.
pg_env "$STB"
out=$(_pb_as_pg env PAGEBACK_TEST_FAULT=backup.standby-replay-behind PGHOST="$PGHOST" \
    PGPORT="$PGPORT" PGUSER=postgres PGDATABASE=postgres "$PB_BIN" backup \
    "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" --wal-timeout 2 2>&1)
rc=$?
pg_env "$PRI"
lsn='([0-9A-F]+/[0-9A-F]+)'
re="ends at $lsn, but the standby has replayed WAL up to $lsn only after 2 s"
if [ $rc = 1 ] && [[ "$out" =~ $re ]]; then
    gap="'${BASH_REMATCH[1]}'::pg_lsn - '${BASH_REMATCH[2]}'::pg_lsn"
    pb_assert_eq "$(pg_psql "$PRI" "SELECT $gap")" 1 \
        "a standby backup whose end is not replayed is refused after the wait, naming both LSNs"
else
    echo "$out" | tail -5 >&2
    pb_test_fail "a standby backup whose end is not replayed is refused (rc $rc)"
fi
pb_assert_eq "$(pb_last_id)" "$I_V" "the refused backup left no backup behind"
kill "$PB_PGBENCH_PID" 2>/dev/null
wait "$PB_PGBENCH_PID" 2>/dev/null

pb_assert_eq "$(pb_info_field "$I_P" parent)" "$F_S" \
    "the primary's incremental builds on the standby's full"
pb_assert_eq "$(pb_info_field "$I_S" parent)" "$F_P" \
    "the standby's incremental builds on the primary's full"
pb_assert_eq "$(pb_info_field "$I_S" read_mode)" wal \
    "the standby's incremental read the blocks the WAL names (not the file-level fallback)"
pb_assert_eq "$(pb_info_field "$I_V" read_mode) $(pb_info_field "$I_V" verify_scan)" "wal True" \
    "the standby's next incremental is a WAL-guided verify scan"
pb_assert_eq "$(pb_info_field "$I_V" pages_missed)" 0 \
    "the verify scan on the standby found no page the WAL-guided read would miss"
for id in "${IDS[@]}"; do
    s=$(pb_info_field "$id" start_lsn) && e=$(pb_info_field "$id" stop_lsn)
    echo "  $id: $s .. $e"
done

pg_psql "$PRI" "CHECKPOINT" >/dev/null
pg_psql "$PRI" "SELECT pg_create_restore_point('after_writes')" >/dev/null
EXPECTED=$(pg_digest_all "$PRI")
pb_archive_all "$PRI" || pb_die "the primary's WAL was not archived"

N=0
# restore_check ID LABEL RESTORE_ARGS...: restore, recover, compare with EXPECTED (when
# the target is after_writes), amcheck, then pg_checksums on the stopped copy.
restore_check() {
    local id=$1 label=$2 d
    shift 2
    N=$((N + 1))
    d=$PB_WORK/r$N
    if ! pb_restore_start "$d" --set "$id" "$@"; then
        pb_test_fail "$label: restore or recovery failed"
        return 1
    fi
    if [ "${*: -1}" = after_writes ]; then
        pb_assert_eq "$(pg_digest_all "$d" | md5sum)" "$(md5sum <<<"$EXPECTED")" \
            "$label: digests equal the primary's at the restore point"
    fi
    pb_check "$label: amcheck" pg_amcheck_all "$d"
    pg_stop "$d" && pb_check "$label: pg_checksums" pg_checksums_check "$d"
    pb_rm_bg "$d"
}

restore_check "$F_S" "standby full" --target-name after_writes
restore_check "$I_P" "primary incremental on the standby full" --target-name after_writes
restore_check "$I_S" "standby incremental on the primary full" --target-name after_writes
restore_check "$I_S" "standby incremental to its own end (immediate)"

# ---- promotion: the standby becomes a primary on timeline 2 and archives there itself
pg_env "$STB"
_pb_as_pg "$PB_PGBIN/pg_ctl" -D "$STB" -w promote >/dev/null 2>&1 && pb_wait_recovery "$STB" ||
    pb_die "the standby was not promoted"
pg_env "$PRI"
pg_stop "$PRI"
backup "$STB" F || give_up "no backup from the promoted standby"
T2=${IDS[-1]}
pb_assert_eq "$(pb_info_field "$T2" timeline)" 2 "after promotion the backup is on timeline 2"
pg_psql "$STB" "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid <= 500" >/dev/null
backup "$STB" I || give_up "no incremental from the promoted standby"
pb_assert_eq "$(pb_info_field "${IDS[-1]}" parent)" "$T2" "the next one builds on it"
pb_test_summary
