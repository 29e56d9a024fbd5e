#!/bin/bash
# backup --pgdata must be the connected server's own data directory: a stopped copy of
# the same cluster (cp -a: same system identifier, another directory) and another
# cluster (another system identifier) are refused before anything is read, naming both
# values, and nothing is committed; the live directory, named directly or through a
# symbolic link, is accepted.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
pg_psql "$SRC" "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 5000) g" \
    >/dev/null || pb_die "table"
pb_backup_logged --checkpoint fast --pgdata "$SRC" ||
    pb_die "a full backup of the live directory failed"
count() { pb info --json | python3 -c "import json, sys; print(len(json.load(sys.stdin)['backups']))"; }
N0=$(count)

# refused LABEL PGDATA PATTERN...: the backup fails, its output matches every PATTERN
# (extended regexes) and the repository holds no new backup.
refused() {
    local label=$1 dir=$2 out p
    shift 2
    if out=$(pb backup --checkpoint fast --pgdata "$dir" 2>&1); then
        echo "$out" | tail -n 5 >&2
        pb_test_fail "$label: the backup of $dir succeeded"
        return
    fi
    for p in "$@"; do
        grep -Eq -- "$p" <<<"$out" || { echo "$out" | tail -n 5 >&2;
            pb_test_fail "$label: the error does not match '$p'"; return; }
    done
    pb_assert_eq "$(count)" "$N0" "$label: refused naming both values, nothing committed"
}

# A stopped copy of the live cluster, older than the live one.
pg_stop "$SRC" || pb_die "stop"
cp -a "$SRC" "$PB_WORK/copy" || pb_die "copy"
pg_start "$SRC" || pb_die "restart"
pg_psql "$SRC" "INSERT INTO t SELECT g, 'new' FROM generate_series(5001, 6000) g" >/dev/null
SYSID=$(pg_psql "$SRC" "SELECT system_identifier FROM pg_control_system()")
refused "stopped copy of the same cluster" "$PB_WORK/copy" \
    "$PB_WORK/copy \(device [0-9]+, inode [0-9]+\) is not the connected server's data_directory $SRC" \
    "system identifier $SYSID"

# Another cluster, never started.
pg_init_cluster "$PB_WORK/other" || pb_die "initdb other"
OTHER_ID=$(_pb_as_pg "$PB_PGBIN/pg_controldata" -D "$PB_WORK/other" |
           sed -n 's/^Database system identifier: *//p')
refused "another cluster" "$PB_WORK/other" \
    "$PB_WORK/other is not the connected server's: its global/pg_control has system identifier $OTHER_ID, the server \(pg_control_system\(\)\) has $SYSID"

# The live directory through a symbolic link is the same directory.
ln -s "$SRC" "$PB_WORK/link"
if pb_backup_logged --checkpoint fast --pgdata "$PB_WORK/link"; then
    pb_test_ok "the live directory through a symbolic link is accepted"
else
    pb_test_fail "the live directory through a symbolic link was refused"
fi
pb_test_summary
