#!/bin/bash
# tests/integration/console_output.sh — what a DBA sees of a backup on the console: a
# spread checkpoint is announced before the wait, with its estimate from the server
# (checkpoint_timeout x checkpoint_completion_target; here 30s x 0.1, so the test is
# quick); the default output is a few lines (the I/O details at --log-level detail); on
# a terminal no log line is glued to the live progress line, which ends at 100% before
# the summary; counts read "1 backup", never "1 backups".
source "$(dirname "$0")/pb_lib.sh"
unset PAGEBACK_LOG_LEVEL # the console's default level is what is checked
pb_setup
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_conf "$SRC" "checkpoint_timeout = 30s" \
    "checkpoint_completion_target = 0.1" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pg_psql "$SRC" "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g" \
    >/dev/null || pb_die "cannot create the table"

# 1. A backup with the default (spread) checkpoint says it waits, and for how long at most.
pb backup --type full >"$PB_WORK/b1.out" 2>"$PB_WORK/b1.err"
pb_assert_eq "$?" 0 "a full backup with a spread checkpoint"
ANN="INFO: waiting for a spread checkpoint: up to about 3 s (checkpoint_timeout 30s x checkpoint_completion_target 0.1)"
grep -qF "$ANN" "$PB_WORK/b1.err" && pb_test_ok "the spread checkpoint is announced with its estimate" ||
    pb_test_fail "no announcement: $(cat "$PB_WORK/b1.err")"
a=$(grep -n "waiting for a spread checkpoint" "$PB_WORK/b1.err" | cut -d: -f1)
s=$(grep -n "started at LSN" "$PB_WORK/b1.err" | cut -d: -f1)
[ -n "$a" ] && [ -n "$s" ] && [ "$a" -lt "$s" ] &&
    pb_test_ok "the announcement comes before the wait (before 'started at LSN')" ||
    pb_test_fail "order: announcement line ${a:-none}, start line ${s:-none}"
# 2. Counts of one are singular: the repository holds one backup now.
pb info >"$PB_WORK/one.out" 2>&1
pb verify >>"$PB_WORK/one.out" 2>&1
grep -q "repository .*: 1 backup$" "$PB_WORK/one.out" && pb_test_ok "info: '1 backup'" ||
    pb_test_fail "info: $(grep repository "$PB_WORK/one.out")"
grep -q "verify passed: 1 backup (0 failed)" "$PB_WORK/one.out" && pb_test_ok "verify: '1 backup'" ||
    pb_test_fail "verify: $(grep 'verify ' "$PB_WORK/one.out")"
bad=$(cat "$PB_WORK/b1.out" "$PB_WORK/b1.err" "$PB_WORK/one.out" |
    grep -Eo "\b1 (backups|files|segments|frames|problems|gaps|entries|pages)\b")
pb_assert_eq "$bad" "" "no '1 <plural>' anywhere in backup, info and verify output"

pb backup --type full --checkpoint fast >/dev/null 2>"$PB_WORK/b2.err"
grep -q "waiting for a spread checkpoint" "$PB_WORK/b2.err" &&
    pb_test_fail "--checkpoint fast announced a wait" || pb_test_ok "--checkpoint fast: no announcement"

# 3. The default console output is the few lines a DBA reads; the rest at detail.
n=$(cat "$PB_WORK/b1.out" "$PB_WORK/b1.err" | wc -l)
[ "$n" -le 5 ] && pb_test_ok "a default full backup prints $n lines (at most 5)" ||
    pb_test_fail "a default full backup prints $n lines: $(cat "$PB_WORK/b1.out" "$PB_WORK/b1.err")"
pg_psql "$SRC" "UPDATE t SET v = 'x' WHERE id <= 100; CHECKPOINT" >/dev/null
out=$(pb backup --type incr --checkpoint fast 2>&1)
n=$(wc -l <<<"$out")
[ "$n" -le 6 ] && pb_test_ok "a default incremental prints $n lines (at most 6)" ||
    pb_test_fail "a default incremental prints $n lines: $out"
grep -q "taking an incremental backup" <<<"$out" && pb_test_ok "'an incremental backup'" ||
    pb_test_fail "article: $(grep taking <<<"$out")"
out=$(pb backup --type full --checkpoint fast --log-level detail 2>&1)
grep -q "DETAIL: I/O class: " <<<"$out" && grep -q "DETAIL: repository: .* flushes" <<<"$out" &&
    pb_test_ok "--log-level detail shows the I/O details" ||
    pb_test_fail "no details at --log-level detail: $out"

# 4. On a terminal (script gives one): the log lines logged while the live line is up
#    (the end-of-scan details, shown at --log-level debug) start on a cleared line, and
#    the last live line before the summary says 100%.
pg_psql "$SRC" "UPDATE t SET v = 'y'; CHECKPOINT" >/dev/null
cmdline="env PGHOST=$PGHOST PGPORT=$PGPORT $PB_BIN backup --repo $PB_REPO --state-dir $PB_STATE --type full --checkpoint fast --max-rate 8M --log-level debug"
_pb_as_pg script -qefc "$cmdline" /dev/null >"$PB_WORK/tty.out" 2>&1
pb_assert_eq "$?" 0 "a backup on a terminal"
python3 - "$PB_WORK/tty.out" <<'PY' && pb_test_ok "no log line is glued to the live progress line" ||
import re, sys
text = open(sys.argv[1], 'rb').read().decode('utf-8', 'replace').replace('\r\n', '\n')
eta = re.compile(r'ETA (unknown|[0-9]+:)')
# What a terminal shows of each line: the text after its last carriage return.
glued = [l for l in text.split('\n') if 'pageback:' in l.split('\r')[-1] and eta.search(l.split('\r')[-1])]
if glued:
    print(repr(glued[0][-300:]))
sys.exit(1 if glued or not eta.search(text) else 0)
PY
    pb_test_fail "a log line shares the terminal line with the progress (see above)"
python3 - "$PB_WORK/tty.out" <<'PY' && pb_test_ok "the live line ends at 100% before the summary" ||
import sys
text = open(sys.argv[1], 'rb').read().decode('utf-8', 'replace')
end = text.find(') complete: LSN')
draws = [d for d in text[:end].split('\r') if d.startswith('backup: ')]
sys.exit(0 if end > 0 and draws and '(100%)' in draws[-1] else 1)
PY
    pb_test_fail "the last live line: $(tr '\r' '\n' <"$PB_WORK/tty.out" | grep '^backup: ' | tail -n 1)"
pb_test_summary
