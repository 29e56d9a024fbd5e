#!/bin/bash
# tests/integration/logfiles.sh — the log file of every run (docs/GUIDE.md, "Logs"):
# created by default per cluster and command (STATE-DIR/log/CLUSTER-COMMAND.log, 0600,
# appended), ending each run with a "complete" line (exit status, duration); --quiet
# quiets the console, not the file; console and file levels are separate
# (--log-level-file, off: no file); --log-path moves it; a link planted at its name is
# not written through; archive-push writes one line per segment and archives on when
# its log cannot be written. A small cluster, no pgbench: quick.
source "$(dirname "$0")/pb_lib.sh"
unset PAGEBACK_LOG_LEVEL # the console's default level is part of what is checked
pb_setup
pb_source_cluster
pg_psql "$SRC" "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g" \
    >/dev/null || pb_die "cannot create the table"
LOGDIR=$PB_STATE/log
BLOG=$LOGDIR/default-backup.log

# lines_after FILE N: the lines of FILE after its first N.
lines_after() { tail -n +"$(($2 + 1))" "$1"; }
count() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# 1. A backup with the defaults: its log file, 0600, the detail the console leaves out,
#    and the complete line.
pb backup --type full --checkpoint fast >"$PB_WORK/b1.out" 2>"$PB_WORK/b1.err"
pb_assert_eq "$?" 0 "a full backup with the default logging"
pb_check "the default log file is STATE-DIR/log/default-backup.log" test -f "$BLOG"
pb_assert_eq "$(stat -c %a "$BLOG" 2>/dev/null)" 600 "the log file is created 0600"
pb_assert_eq "$(stat -c %U "$BLOG" 2>/dev/null)" postgres "the log file belongs to the user that ran"
grep -Eq '^[0-9-]{10}T[0-9:]{8}Z \[[0-9]+\] INFO: backup complete: exit 0 \(success\) in [0-9.]+ s$' \
    "$BLOG" && pb_test_ok "the run ends with a complete line: exit status and duration" ||
    pb_test_fail "no complete line: $(tail -n 3 "$BLOG" 2>/dev/null)"
grep -q "INFO: backup .* started at LSN" "$BLOG" && pb_test_ok "the file has the run's info lines" ||
    pb_test_fail "no info lines in the file: $(head -n 5 "$BLOG" 2>/dev/null)"
grep -q "DETAIL: I/O class: " "$BLOG" && ! grep -q "I/O class" "$PB_WORK/b1.err" &&
    pb_test_ok "levels are separate: the I/O details in the file (detail), not on the console (info)" ||
    pb_test_fail "I/O class line: file $(grep -c 'I/O class' "$BLOG" 2>/dev/null), console $(grep -c 'I/O class' "$PB_WORK/b1.err")"

# 2. --quiet: nothing on the console, the file as usual.
N=$(count "$BLOG")
out=$(pb backup --type full --checkpoint fast --quiet 2>&1)
pb_assert_eq "$?/$out" "0/" "--quiet: a backup prints nothing"
grep -q "INFO: backup complete: exit 0" <(lines_after "$BLOG" "$N") &&
    grep -q "INFO: backup .* started at LSN" <(lines_after "$BLOG" "$N") &&
    pb_test_ok "--quiet still logs the run and its complete line to the file" ||
    pb_test_fail "--quiet: the file got $(lines_after "$BLOG" "$N" | head -n 5)"
pb_assert_eq "$(grep -c ' begin$' "$BLOG")" 2 "each run appends (two begin lines)"

# 3. The levels, each its own: --log-level-file warn keeps info out of the file while
#    --log-level debug puts debug on the console.
N=$(count "$BLOG")
pb backup --type full --checkpoint fast --log-level debug --log-level-file warn \
    >/dev/null 2>"$PB_WORK/b3.err"
pb_assert_eq "$?" 0 "a backup with --log-level debug --log-level-file warn"
grep -q "DETAIL: I/O class" "$PB_WORK/b3.err" && pb_test_ok "the console shows detail at debug" ||
    pb_test_fail "console at debug: $(head -n 3 "$PB_WORK/b3.err")"
extra=$(lines_after "$BLOG" "$N" | grep -E '\] (INFO|DETAIL|DEBUG): ' | grep -v ' begin$' |
    grep -v ' complete: exit ')
pb_assert_eq "$extra" "" "--log-level-file warn: no info, detail or debug lines in the file"
grep -q "complete: exit 0" <(lines_after "$BLOG" "$N") &&
    pb_test_ok "the complete line is written at any file level" ||
    pb_test_fail "no complete line at --log-level-file warn"

# 4. --log-level-file off: no file at all; --log-path: the file elsewhere, created there.
pb info --log-level-file off >/dev/null 2>&1
pb_check "--log-level-file off: no info log is created" test ! -e "$LOGDIR/default-info.log"
mkdir -p "$PB_WORK/logs" && _pb_chown_pg "$PB_WORK/logs"
pb info --log-path "$PB_WORK/logs/pageback" >/dev/null 2>&1
pb_assert_eq "$?" 0 "info with --log-path"
grep -q "info complete: exit 0" "$PB_WORK/logs/pageback/default-info.log" 2>/dev/null &&
    pb_test_ok "--log-path: the log file (and its directory) made there" ||
    pb_test_fail "--log-path: $(ls -la "$PB_WORK/logs" 2>&1)"
out=$(pb verify --set nonesuch --log-path "$PB_WORK/logs/pageback" 2>&1)
rc=$?
# A --set that names no backup is a usage error (exit 2), logged like any failure.
grep -Eq "\] ERROR: --set nonesuch: no such backup" "$PB_WORK/logs/pageback/default-verify.log" 2>/dev/null &&
    [ "$rc" = 2 ] &&
    grep -q "verify complete: exit 2 (usage error)" "$PB_WORK/logs/pageback/default-verify.log" &&
    pb_test_ok "a failed run logs its error and its exit status $rc" ||
    pb_test_fail "failed run's log (rc $rc): $(cat "$PB_WORK/logs/pageback/default-verify.log" 2>&1)"

# 5. A link planted at the log file's name is not followed; the run goes on, warned.
echo precious >"$PB_WORK/victim" && chmod 666 "$PB_WORK/victim"
ln -s "$PB_WORK/victim" "$LOGDIR/default-expire.log"
out=$(pb expire --retain-full 5 2>&1)
pb_assert_eq "$?" 0 "expire runs although its log file is a link"
pb_assert_eq "$(cat "$PB_WORK/victim")" precious "the link's target is not written"
grep -q "WARNING: .*log file .*default-expire.log" <<<"$out" &&
    pb_test_ok "the refusal is said once on stderr" || pb_test_fail "no warning: $out"
rm -f "$LOGDIR/default-expire.log"

# 6. archive-push as PostgreSQL runs it: one line per segment in its own file.
ALOG=$LOGDIR/default-archive-push.log
archived() { pg_psql "$SRC" "SELECT archived_count FROM pg_stat_archiver"; }
failed() { pg_psql "$SRC" "SELECT failed_count FROM pg_stat_archiver"; }
wait_archived() { # N: wait until archived_count reaches N
    for _ in $(seq 1 100); do [ "$(archived)" -ge "$1" ] && return 0; sleep 0.1; done
    return 1
}
set_archive_command() {
    pg_psql "$SRC" "ALTER SYSTEM SET archive_command = '$PB_BIN archive-push %p --repo $PB_REPO --state-dir $PB_STATE $*'" >/dev/null &&
        pg_psql "$SRC" "SELECT pg_reload_conf()" >/dev/null
}
set_archive_command
sleep 0.5
A0=$(archived)
N=$(count "$ALOG")
pg_psql "$SRC" "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 1000) g; SELECT pg_switch_wal()" >/dev/null
pb_check "the segment is archived" wait_archived $((A0 + 1))
new=$(lines_after "$ALOG" "$N")
grep -Eq '\] INFO: archive-push [0-9A-F]{24} complete: exit 0 \(success\) in [0-9.]+ s$' <<<"$new" &&
    pb_test_ok "archive-push logs the segment it pushed, with its exit status" ||
    pb_test_fail "archive-push log: $new"
pb_assert_eq "$(grep -c . <<<"$new")" 1 "one line per push at the default levels"
pb_assert_eq "$(stat -c %a "$ALOG" 2>/dev/null)" 600 "archive-push's log file is 0600"

# 7. An unwritable log path: archive-push warns on stderr (the server log) and pushes.
mkdir -m 0555 "$PB_WORK/ro"
set_archive_command --log-path "$PB_WORK/ro/logs"
sleep 0.5
A1=$(archived)
F1=$(failed)
PGLOG_N=$(wc -l <"$(pg_logfile "$SRC")")
pg_psql "$SRC" "INSERT INTO t SELECT g, 'y' FROM generate_series(1, 1000) g; SELECT pg_switch_wal()" >/dev/null
pb_check "archiving goes on with an unwritable log path" wait_archived $((A1 + 1))
pb_assert_eq "$(failed)" "$F1" "no archive-push failed for its log"
lines_after "$(pg_logfile "$SRC")" "$PGLOG_N" | grep -q "WARNING: cannot .*$PB_WORK/ro/logs" &&
    pb_test_ok "the unwritable log is warned about on stderr (in the server log)" ||
    pb_test_fail "no warning in the server log: $(lines_after "$(pg_logfile "$SRC")" "$PGLOG_N" | tail -n 5)"
pb_check "nothing was created under the unwritable path" test ! -e "$PB_WORK/ro/logs"
pb_test_summary
