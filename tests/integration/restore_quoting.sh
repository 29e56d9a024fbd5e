#!/bin/bash
# restore writes the repository, config and program paths into restore_command as
# single-quoted shell words (an embedded ' as '\''), % doubled for PostgreSQL's own
# substitution, inside a postgresql.auto.conf string literal (' and \ doubled). A path
# holding $(...), backticks, a quote, % or a backslash reaches archive-get as it is
# and runs nothing.
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
trap '_pb_rc=$?; (exit $_pb_rc); _pb_cleanup' EXIT
PB_STATE=$PB_WORK/state
mkdir -p "$PB_STATE" && _pb_chown_pg "$PB_STATE"
MARK=$PB_WORK/mark # where an executed $(touch ...) would leave its file (postgres may write)
mkdir -p "$MARK" && _pb_chown_pg "$MARK"
PB_REPO="$PB_WORK/r\$(touch $MARK/pwned1)\`touch $MARK/pwned2\`'q 50%p a\\b"
mkdir -p "$PB_REPO" && _pb_chown_pg "$PB_WORK"/r*
PB_REPO_ARGS=(--repo "$PB_REPO")
CONF="$PB_WORK/conf \$(touch pwned3) 'x'.conf"
echo "# nothing but a comment" >"$CONF" && chmod 600 "$CONF" && _pb_chown_pg "$CONF"
# archive_command through a script (the repository path as one quoted word).
PUSH=$PB_WORK/push.sh
printf '#!/bin/sh\nexec %q archive-push "$1" --repo %q\n' "$PB_BIN" "$PB_REPO" >"$PUSH"
chmod 755 "$PUSH"
PB_ARCHIVE_COMMAND="$PUSH %p"
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_conf "$SRC" "autovacuum = off" && pg_start "$SRC" ||
    pb_die "source cluster did not start"
pg_env "$SRC"
pg_psql "$SRC" "CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g" >/dev/null
pb_check "full backup into a repository named $PB_REPO" pb_backup_logged --type full \
    --checkpoint fast
pg_psql "$SRC" "INSERT INTO t SELECT g FROM generate_series(1, 500) g" >/dev/null
pb_check "WAL after the backup archived" pb_archive_all "$SRC"
D=$PB_WORK/copy
if pb_restore_start "$D" --target-end --config "$CONF"; then
    pb_assert_eq "$(pg_psql "$D" "SELECT count(*) FROM t")" 1500 \
        "the copy recovered through archive-get up to the end of the archive"
    pg_stop "$D"
else
    pb_test_fail "the copy did not recover"
fi
grep -a "restore_command" "$D/postgresql.auto.conf" | head -n 1 | cut -c1-300
for f in "$MARK/pwned1" "$MARK/pwned2" "$D/pwned3" "$SRC/pwned3"; do
    [ -e "$f" ] && pb_test_fail "$f was created: the path ran through the shell" ||
        pb_test_ok "nothing ran: no $(basename "$f")"
done
pb_test_summary
