#!/bin/bash
# pageback check: exit 0 only when a backup would succeed, 1 on a failed check naming
# the setting (and its fix), 2 on a usage error. A good setup passes with a WAL round
# trip; each broken piece fails on its own: a repository not initialized, a --pgdata
# that is not the server's, a repository of another cluster, archive_command pushing
# elsewhere or not pushing at all (`true`), a failing archive_command (the round trip
# times out within --archive-timeout, the archiver's failure is named), archive_mode
# off, a repository others may write. A standby passes what applies; the round trip is the primary's.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
chmod 0750 "$PB_REPO"
pb_source_cluster

# expect LABEL RC CMD_ARGS... -- PATTERN...: `pb check CMD_ARGS` exits RC and its output
# matches every PATTERN (extended regexes).
expect() {
    local label=$1 want=$2 out rc p args=()
    shift 2
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    out=$(pb check --pgdata "$SRC" "${args[@]}" 2>&1)
    rc=$?
    [ "${PB_SHOW:-0}" = 1 ] && echo "$out" >&2
    [ "$rc" = "$want" ] || { echo "$out" | tail -n 8 >&2;
        pb_test_fail "$label: exit $rc, wanted $want"; return 1; }
    for p in "$@"; do
        grep -Eq -- "$p" <<<"$out" || { echo "$out" | tail -n 8 >&2;
            pb_test_fail "$label: the output does not match '$p'"; return 1; }
    done
    pb_test_ok "$label"
}
set_archive_command() {
    pg_psql "$SRC" "ALTER SYSTEM SET archive_command = '${1//\'/\'\'}'" >/dev/null &&
        pg_psql "$SRC" "SELECT pg_reload_conf()" >/dev/null && sleep 0.5
}

expect "a repository not initialized fails naming pageback init" 1 --archive-timeout 3 -- \
    "repository: $PB_REPO is not initialized .*fix: pageback init --repo $PB_REPO"
pb init --pgdata "$SRC" >/dev/null || pb_die "init"
expect "a good setup passes with a WAL round trip" 0 -- \
    "ok +--pgdata: $SRC is the server's data directory" "ok +archive_mode: archive_mode is on" \
    "ok +archive_command: archive_command runs pageback archive-push into $PB_REPO" \
    "ok +archive: WAL segment [0-9A-F]{24} reached $PB_REPO" "check passed"
expect "--archive-timeout that is not a number is a usage error" 2 --archive-timeout soon -- \
    "--archive-timeout must be 1..86400 seconds, not 'soon'"

cp -a "$SRC" "$PB_WORK/copy" 2>/dev/null
rm -f "$PB_WORK/copy/postmaster.pid"
out=$(pb check --pgdata "$PB_WORK/copy" --archive-timeout 10 2>&1)
rc=$?
grep -Eq -- "--pgdata: data directory $PB_WORK/copy .* is not the connected server's data_directory $SRC.*fix: " <<<"$out" &&
    [ $rc = 1 ] && pb_test_ok "a --pgdata that is not the server's fails naming --pgdata" ||
    { echo "$out" | tail -n 5 >&2; pb_test_fail "wrong --pgdata: exit $rc"; }

# A repository initialized for another cluster.
pg_init_cluster "$PB_WORK/other" || pb_die "initdb other"
OTHER_REPO=$PB_WORK/repos/other
mkdir -p "$PB_WORK/repos" && _pb_chown_pg "$PB_WORK/repos"
pb init --repo "$OTHER_REPO" --pgdata "$PB_WORK/other" >/dev/null || pb_die "init other"
expect "a repository of another cluster fails naming --repo" 1 --repo "$OTHER_REPO" --archive-timeout 2 -- \
    "--repo: wrong repository: $OTHER_REPO holds backups of the cluster with system identifier [0-9]+, but this cluster's is [0-9]+; fix: "

GOOD=$(pg_psql "$SRC" "SHOW archive_command")
set_archive_command "$PB_BIN archive-push %p --repo $PB_WORK/elsewhere"
expect "archive_command pushing elsewhere fails naming archive_command" 1 --archive-timeout 2 -- \
    "archive_command: archive_command pushes into repository $PB_WORK/elsewhere, this check's repository is $PB_REPO; fix: set archive_command = 'pageback archive-push %p --repo $PB_REPO'"
set_archive_command "true"
expect "archive_command true fails naming archive_command" 1 --archive-timeout 2 -- \
    "archive_command: archive_command 'true' does not run pageback archive-push" \
    "did not reach $PB_REPO within --archive-timeout 2 s"

# A command that reads as the right one but fails: the round trip is the proof.
set_archive_command "false && $GOOD"
expect "a failing archive_command: the round trip times out naming the archiver" 1 --archive-timeout 3 -- \
    "archive_command: WAL segment [0-9A-F]{24} \(switched by pg_switch_wal\) did not reach $PB_REPO within --archive-timeout 3 s" \
    "fix: fix archive_command"
expect "the archiver's failures are named from pg_stat_archiver" 1 --archive-timeout 2 -- \
    "archive_command: the archiver is failing \(pg_stat_archiver\): [0-9]+ failures, the last of [0-9A-F]{24}"
set_archive_command "$GOOD"
pg_psql "$SRC" "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 1 50); do
    [ "$(pg_psql "$SRC" "SELECT last_archived_time > coalesce(last_failed_time, '-infinity') FROM pg_stat_archiver")" = t ] && break
    sleep 0.2
done
expect "the restored archive_command passes again" 0 -- "check passed"

# A standby: what applies is checked; archiving is the primary's, the switch cannot be
# forced there, and check says so.
STB=$PB_WORK/stb
mkdir -p "$STB" && chmod 0700 "$STB" && _pb_chown_pg "$STB"
_pb_as_pg "$PB_PGBIN/pg_basebackup" -D "$STB" -R -X stream -c fast -h "$(pg_sockdir "$SRC")" \
    -p "$(pg_port "$SRC")" -U postgres >"$PB_WORK/basebackup.out" 2>&1 ||
    { cat "$PB_WORK/basebackup.out"; pb_die "pg_basebackup failed"; }
pg_reconfigure "$STB" && pg_start "$STB" || pb_die "standby did not start"
out=$(pb check --pgdata "$STB" --dbname "host=$(pg_sockdir "$STB") port=$(pg_port "$STB") dbname=postgres" 2>&1)
rc=$?
[ "${PB_SHOW:-0}" = 1 ] && echo "$out" >&2
grep -q "skip  archive_mode: archive_mode is on on a standby: the primary archives" <<<"$out" &&
    grep -q "skip  archive: the server is a standby: a WAL switch cannot be forced here" <<<"$out" &&
    grep -q "ok    --pgdata: $STB is the server's data directory" <<<"$out" && [ $rc = 0 ] &&
    pb_test_ok "a standby: checked what applies, the round trip left to the primary (exit 0)" ||
    { echo "$out" | tail -n 8 >&2; pb_test_fail "standby check: exit $rc"; }
pg_stop "$STB"

chmod 0777 "$PB_REPO"
expect "a repository others may write fails naming chmod" 1 -- \
    "repository: repository directory $PB_REPO has mode 0777.*fix: chmod 0750"
chmod 0750 "$PB_REPO"

pg_psql "$SRC" "ALTER SYSTEM SET archive_mode = off" >/dev/null
pg_stop "$SRC" && pg_start "$SRC" || pb_die "restart with archive_mode off"
expect "archive_mode off fails naming archive_mode" 1 --archive-timeout 2 -- \
    "archive_mode: archive_mode is off: no WAL reaches the repository; fix: set archive_mode = on"
pb_test_summary
