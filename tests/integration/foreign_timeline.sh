#!/bin/bash
# PITR across a foreign timeline (trust issue, defect 7). A test restore of the full
# backup is promoted while its archive_command still points at the repository: it pushes
# timeline 2 (00000002.history and two segments) into it, while production goes on
# writing on timeline 1. A restore to an LSN on timeline 1 past the branch point must
# reach it (recovering along timeline 1) and hold exactly the rows at that LSN; a time
# target there is placed by reading both timelines' archived WAL after the branch and
# reached along timeline 1, with or without --target-timeline 1.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
rows() { pg_psql "$1" "SELECT count(*) || ' ' || md5(coalesce(string_agg(id || tag, ',' ORDER BY id), '')) FROM t"; }
# archive_all DIR: switch WAL on DIR and wait until that segment is archived.
archive_all() {
    local seg last i
    seg=$(pg_psql "$1" "SELECT pg_walfile_name(pg_switch_wal())")
    for i in $(seq 1 300); do
        last=$(pg_psql "$1" "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        [[ "${last:8:16}" < "${seg:8:16}" ]] || return 0
        sleep 0.1
    done
    echo "archive_all: $seg of $1 was not archived" >&2
    return 1
}
# promoted DIR: wait until DIR has left recovery; fail at once if the server stopped.
promoted() {
    local i
    for i in $(seq 1 300); do
        [ "$(pg_psql "$1" 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && return 0
        pg_is_running "$1" || { tail -n 5 "$(pg_logfile "$1")" >&2; return 1; }
        sleep 0.2
    done
    return 1
}

q "CREATE TABLE t (id serial PRIMARY KEY, tag text NOT NULL)" >/dev/null
q "INSERT INTO t (tag) SELECT 'base' FROM generate_series(1, 100)" >/dev/null
out=$(pb backup --type full 2>&1) || { echo "$out"; pb_die "full backup failed"; }
F1=$(pb_last_id)

# ---- the foreign timeline: a promoted test restore archiving into the same repository
R=$PB_WORK/testcopy
mkdir -p "$R" && chmod 0700 "$R" && _pb_chown_pg "$R"
pb restore --target-dir "$R" --archive-mode preserve >"$PB_WORK/restore.out" 2>&1 || { cat "$PB_WORK/restore.out"; pb_die "test restore failed"; }
pg_reconfigure "$R" && pg_conf "$R" "archive_mode = on" \
    "archive_command = '${PB_ARCHIVE_COMMAND//\'/\'\'}'" || pb_die "cannot configure $R"
pg_start "$R" && promoted "$R" || pb_die "the test restore did not promote"
pg_psql "$R" "INSERT INTO t (tag) SELECT 'foreign' FROM generate_series(1, 10)" >/dev/null
archive_all "$R" && pg_psql "$R" "INSERT INTO t (tag) VALUES ('foreign2')" >/dev/null &&
    archive_all "$R" || pb_die "timeline 2 was not archived"
pg_stop "$R"
pb_assert_eq "$(pb info --json | python3 -c "
import json, sys
print(sorted(w['timeline'] for w in json.load(sys.stdin)['wal']))")" "[1, 2]" \
    "the repository holds WAL of timelines 1 and 2"

# ---- production goes on on timeline 1, past the branch point
q "INSERT INTO t (tag) SELECT 'prod' FROM generate_series(1, 2000)" >/dev/null
EXP=$(rows "$SRC")
L=$(q "SELECT pg_current_wal_lsn()")
sleep 1.1
T=$(PGTZ=UTC q "SELECT now()")
sleep 0.2
q "INSERT INTO t (tag) SELECT 'later' FROM generate_series(1, 50)" >/dev/null
archive_all "$SRC" || pb_die "timeline 1 was not archived"
pb_log "F1=$F1, target LSN $L / time $T on timeline 1"

N=0
# pitr LABEL RESTORE_ARGS...: restore, start, and compare with the rows at the target.
pitr() {
    local label=$1 d
    shift
    N=$((N + 1))
    d=$PB_WORK/r$N
    mkdir -p "$d" && chmod 0700 "$d" && _pb_chown_pg "$d"
    if ! pb restore --target-dir "$d" "$@" >"$PB_WORK/restore.out" 2>&1; then
        pb_test_fail "$label: restore refused: $(cat "$PB_WORK/restore.out")"
        return 1
    fi
    pg_reconfigure "$d" && pg_conf "$d" "archive_mode = off"
    if ! pg_start "$d" || ! promoted "$d"; then
        pb_test_fail "$label: the restored cluster did not reach the target"
        pg_is_running "$d" && pg_stop "$d"
        return 1
    fi
    pb_test_ok "$label: recovery reached the target"
    pb_assert_eq "$(rows "$d")" "$EXP" "$label: exactly the rows at the target"
    pb_assert_eq "$(pg_psql "$d" "SELECT timeline_id FROM pg_control_checkpoint()")" 3 \
        "$label: promoted to a new timeline 3 (after 1 and 2)"
    pg_stop "$d"
    cp "$d/postgresql.auto.conf" "$PB_WORK/auto.conf.$N"
    rm -rf "$d"
}

pitr "LSN on timeline 1 past the branch" --target-lsn "$L"
pb_check "the restore wrote recovery_target_timeline = '1'" \
    grep -q "^recovery_target_timeline = '1'" "$PB_WORK/auto.conf.1"

# A time target there is placed by reading both timelines' WAL after the branch: only
# timeline 1's reaches it (timeline 2's ends before the target time).
pitr "time on timeline 1 past the branch, placed by the WAL" --target-time "$T"
pb_check "the restore wrote recovery_target_timeline = '1' for the time" \
    grep -q "^recovery_target_timeline = '1'" "$PB_WORK/auto.conf.2"
pb_check "the restore names the commit it stops before on timeline 1" grep -q \
    "only on timeline 1: replay stops before the commit at .* on timeline 1" "$PB_WORK/restore.out"
pitr "time on timeline 1 past the branch, --target-timeline 1" --target-time "$T" \
    --target-timeline 1

# verify reads both timelines and the history file (defect 8).
pb_check "verify passes with two timelines in the archive" pb verify
if [ "$PB_REPO_KIND" = posix ]; then
    H=$PB_REPO/wal/history/00000002.history.zst
    cp "$H" "$PB_WORK/history.orig"
    printf 'ZZ' | dd of="$H" bs=1 seek=40 conv=notrunc status=none
    out=$(pb verify 2>&1)
    if [ $? != 0 ] && grep -q "00000002.history" <<<"$out"; then
        pb_test_ok "verify names the damaged history file"
    else
        pb_test_fail "damaged history file: $(tail -n 3 <<<"$out")"
    fi
    cp "$PB_WORK/history.orig" "$H"
    # The first segment of timeline 2 (where it branched) is part of it: its loss is a gap.
    FIRST2=$(ls "$PB_REPO/wal/00000002/" | head -n 1)
    mv "$PB_REPO/wal/00000002/$FIRST2" "$PB_WORK/first2.zst"
    out=$(pb verify 2>&1)
    if [ $? != 0 ] && grep -q "gap in the WAL archive on timeline 2: ${FIRST2%.zst}" <<<"$out"; then
        pb_test_ok "verify names the missing first segment of timeline 2 as a gap"
    else
        pb_test_fail "missing ${FIRST2%.zst}: $(tail -n 3 <<<"$out")"
    fi
    mv "$PB_WORK/first2.zst" "$PB_REPO/wal/00000002/$FIRST2"
fi
pb_test_summary
