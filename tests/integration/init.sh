#!/bin/bash
# pageback init: the repository is made by a deliberate step. It creates a missing
# repository directory (mode 0750) and records the cluster's system identifier; run
# again it says "already initialized"; it refuses a repository of another cluster and
# a directory in use for something else. archive-push and backup into a repository
# directory that does not exist fail naming `pageback init`, and create nothing (a
# mistyped path must not become a new repository).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" || pb_die "initdb"
SYSID=$(_pb_as_pg "$PB_PGBIN/pg_controldata" -D "$SRC" | sed -n 's/^Database system identifier: *//p')
ROOT=$PB_WORK/repos
mkdir -p "$ROOT" && _pb_chown_pg "$ROOT"

# expect LABEL RC PATTERN CMD...: CMD exits RC and its output matches PATTERN.
expect() {
    local label=$1 want=$2 pat=$3 out rc
    shift 3
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" != "$want" ] || ! grep -Eq -- "$pat" <<<"$out"; then
        echo "$out" | tail -n 5 >&2
        pb_test_fail "$label: exit $rc (wanted $want), output does not match '$pat'"
        return 1
    fi
    pb_test_ok "$label"
}

NEW=$ROOT/new
expect "init creates a missing repository" 0 "repository $NEW initialized for the cluster with system identifier $SYSID" \
    pb init --repo "$NEW" --pgdata "$SRC"
pb_assert_eq "$(stat -c %a "$NEW" 2>/dev/null)" 750 "the new repository directory is private (0750)"
grep -q "system-identifier=$SYSID" "$NEW/pageback.repo" 2>/dev/null &&
    pb_test_ok "the identity records the cluster's system identifier" ||
    pb_test_fail "no identity with system identifier $SYSID in $NEW/pageback.repo"
expect "init again says already initialized" 0 "repository $NEW already initialized" \
    pb init --repo "$NEW" --pgdata "$SRC"

pg_init_cluster "$PB_WORK/other" || pb_die "initdb other"
OTHER=$(_pb_as_pg "$PB_PGBIN/pg_controldata" -D "$PB_WORK/other" | sed -n 's/^Database system identifier: *//p')
expect "init refuses a repository of another cluster" 1 \
    "wrong repository: $NEW holds backups of the cluster with system identifier $SYSID, but this cluster's is $OTHER" \
    pb init --repo "$NEW" --pgdata "$PB_WORK/other"

USED=$ROOT/used
mkdir -p "$USED" && echo data >"$USED/notes.txt" && _pb_chown_pg "$USED"
expect "init refuses a directory in use" 1 "$USED holds 1 objects but no pageback.repo" \
    pb init --repo "$USED" --pgdata "$SRC"
[ ! -e "$USED/pageback.repo" ] && pb_test_ok "nothing written into the directory in use" ||
    pb_test_fail "init wrote $USED/pageback.repo"

expect "init without a data directory or a server names what it needs" 1 \
    "init needs the cluster's system identifier: give --pgdata DIR" \
    pb init --repo "$ROOT/nosrv" --dbname "host=$PB_WORK/sock port=1 dbname=postgres"
expect "init refuses a path that is not a data directory" 1 "is $ROOT a PostgreSQL data directory" \
    pb init --repo "$ROOT/nosrv" --pgdata "$ROOT"

# A mistyped repository path: archive-push and backup fail naming init, create nothing.
TYPO=$ROOT/typo
pg_start "$SRC" || pb_die "start"
pg_env "$SRC"
WAL=$(ls "$SRC/pg_wal" | grep -E '^[0-9A-F]{24}$' | head -n 1)
expect "archive-push into a missing repository names pageback init" 1 \
    "repository directory $TYPO does not exist: run pageback init --repo $TYPO" \
    pb archive-push "$SRC/pg_wal/$WAL" --repo "$TYPO"
expect "backup into a missing repository names pageback init" 1 \
    "repository directory $TYPO does not exist: run pageback init --repo $TYPO" \
    pb backup --checkpoint fast --pgdata "$SRC" --repo "$TYPO"
[ ! -e "$TYPO" ] && pb_test_ok "the mistyped repository was not created" ||
    pb_test_fail "$TYPO was created"
pb_test_summary
