#!/bin/bash
# tests/integration/reports.sh — what an operator sees of real runs against a real
# PostgreSQL 15: --report JSON of backup (full and incremental), restore and verify,
# also of a failed backup; --metrics-file in Prometheus text with the last backup per
# type, the WAL archive lag (from the server) and the archive-push failure counter;
# progress lines off a terminal (--progress-interval) and the live line on one, of backup
# (an incremental's total is what it plans to read), verify and rebase; the page cache the
# backup left behind; --quiet and --log-file. pgbench -s 1, so it stays fast.
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
trap '_pb_rc=$?; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT
pb_repo_setup
# archive-push counts its failures in the state directory the backups use.
PB_ARCHIVE_COMMAND="$PB_BIN archive-push %p ${PB_REPO_ARGS[*]} --state-dir $PB_STATE"
export PB_ARCHIVE_COMMAND
pb_source_pgbench 1
OUT=$PB_WORK/out
mkdir -p "$OUT" && _pb_chown_pg "$OUT"

# json FILE EXPR: print a value of the JSON in FILE (EXPR like ["backup"]["type"]).
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$@"; }
has_keys() { # FILE KEY...: every KEY at the top of the JSON object in FILE
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if all(k in d for k in sys.argv[2:]) else 1)
PY
}
KEYS="report_version command exit_status ok error started_at duration_seconds cpu_user_seconds
      cpu_system_seconds peak_rss_bytes page_cache_bytes_left adaptive_io limits"
prom_ok() { # FILE: Prometheus text exposition grammar, at least one sample
    python3 - "$1" <<'PY'
import re, sys
name = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
sample = re.compile(r'^(%s)(\{(%s)(,%s)*\})? [-+]?([0-9.eE+-]+|NaN|Inf)( -?[0-9]+)?$' % (name, label, label))
meta = re.compile(r'^# (HELP %s .*|TYPE %s (counter|gauge|histogram|summary|untyped))$' % (name, name))
text = open(sys.argv[1]).read()
lines = text.split('\n')
bad = [l for l in lines[:-1] if not (sample.match(l) or meta.match(l))]
sys.exit(1 if bad or lines[-1] != '' or not any(sample.match(l) for l in lines) else 0)
PY
}

# 1. A full backup, throttled so it lasts a few seconds: report, metrics, progress log.
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb_past_skip_margin # the checkpoint's writes: the incremental may skip them
pb backup --type full --max-rate 8M --progress-interval 1 --report "$OUT/full.json" \
    --metrics-file "$OUT/full.prom" --log-file "$OUT/backup.log" >"$PB_WORK/full.out" \
    2>"$PB_WORK/full.err"
pb_assert_eq "$?" 0 "the full backup succeeds"
has_keys "$OUT/full.json" $KEYS backup read_rate_bytes_per_second &&
    pb_test_ok "the backup's report has the required keys" ||
    pb_test_fail "report keys: $(cat "$OUT/full.json")"
pb_assert_eq "$(json "$OUT/full.json" '["backup"]["type"]') $(json "$OUT/full.json" '["ok"]')" \
    "full True" "the report names a successful full backup"
for f in bytes_read pages_scanned pages_changed bytes_stored files; do
    v=$(json "$OUT/full.json" "[\"backup\"][\"$f\"]")
    [ "${v:-0}" -gt 0 ] && pb_test_ok "report: backup.$f = $v" || pb_test_fail "report: backup.$f = $v"
done
id=$(json "$OUT/full.json" '["backup"]["id"]')
pb_assert_eq "$(json "$OUT/full.json" '["backup"]["stop_lsn"]')" "$(pb_info_field "$id" stop_lsn)" \
    "the report's WAL window matches info"
pb_assert_eq "$(json "$OUT/full.json" '["limits"]["max_rate_bytes_per_second"]')" $((8 << 20)) \
    "the report lists the rate limit applied"
pb_assert_eq "$(json "$OUT/full.json" '["backup"]["checksum_errors"]')" 0 "no checksum warnings"
# --max-rate pins the reads: the controller reports it did not adapt, and what was applied.
pb_assert_eq "$(json "$OUT/full.json" '["adaptive_io"]["adaptive"]')" False \
    "the report's adaptive_io says --max-rate pinned the reads"
v=$(json "$OUT/full.json" '["adaptive_io"]["requests"]')
[ "${v:-0}" -gt 0 ] && pb_test_ok "report: adaptive_io.requests = $v" ||
    pb_test_fail "report: adaptive_io.requests = $v"
json "$OUT/full.json" '["io_applied"]["io_class_applied"]' | grep -Eq "idle|best-effort" &&
    pb_test_ok "report: io_applied names the I/O class" ||
    pb_test_fail "report: io_applied = $(json "$OUT/full.json" '["io_applied"]')"
v=$(json "$OUT/full.json" '["backup_requests"]["put"]')
[ "${v:-0}" -gt 0 ] && pb_test_ok "report: backup_requests.put = $v" ||
    pb_test_fail "report: backup_requests.put = $v"
grep -q "INFO: progress: .* MiB (.*%), .* MB/s, files [0-9]*/[0-9]*, pages changed [0-9]*, ETA" \
    "$PB_WORK/full.err" && pb_test_ok "off a terminal, progress comes as log lines" ||
    pb_test_fail "no progress lines: $(cat "$PB_WORK/full.err")"
grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z \[[0-9]+\] INFO: backup .* started at LSN" \
    "$OUT/backup.log" && pb_test_ok "--log-file gets timestamped log lines" ||
    pb_test_fail "log file: $(head -3 "$OUT/backup.log")"
prom_ok "$OUT/full.prom" && pb_test_ok "the metrics file parses as Prometheus text" ||
    pb_test_fail "metrics grammar: $(cat "$OUT/full.prom")"
stop=$(pb_info_field "$id" stop_time)
grep -q "^pageback_backup_last_success_timestamp_seconds{[^}]*type=\"full\"} $stop$" "$OUT/full.prom" &&
    pb_test_ok "metrics: last successful full backup time" ||
    pb_test_fail "no last full time $stop: $(grep last_success "$OUT/full.prom")"
grep -Eq '^pageback_wal_archive_lag_segments\{[^}]*\} [0-9]+$' "$OUT/full.prom" &&
    pb_test_ok "metrics: WAL archive lag measured against the server" ||
    pb_test_fail "no lag: $(grep wal "$OUT/full.prom")"
# the page cache the reads left behind is measured (mincore), in the report and the metrics;
# O_DIRECT reads leave next to nothing (at most what the database itself read meanwhile)
left=$(json "$OUT/full.json" '["page_cache_bytes_left"]')
read=$(json "$OUT/full.json" '["backup"]["bytes_read"]')
[[ "$left" =~ ^[0-9]+$ ]] && [ "$left" -le $((read / 10)) ] &&
    pb_test_ok "report: page_cache_bytes_left = $left (of $read bytes read)" ||
    pb_test_fail "report: page_cache_bytes_left = $left (of $read bytes read)"
grep -q "^pageback_run_page_cache_left_bytes{[^}]*} $left$" "$OUT/full.prom" &&
    pb_test_ok "metrics: pageback_run_page_cache_left_bytes" ||
    pb_test_fail "metrics: $(grep page_cache "$OUT/full.prom")"
grep -Eq '^pageback_run_read_rate_bytes_per_second\{[^}]*\} [1-9][0-9]*$' "$OUT/full.prom" &&
    grep -q '^pageback_archive_push_failures_total{[^}]*} 0$' "$OUT/full.prom" &&
    pb_test_ok "metrics: the backup's read rate; no archive failures" ||
    pb_test_fail "metrics: $(cat "$OUT/full.prom")"

# 2. An incremental with --quiet, on a (pseudo) terminal: the live line, no INFO lines.
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 1000" >/dev/null
_pb_as_pg script -qec "env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=postgres PGDATABASE=postgres \
    $PB_BIN backup ${PB_REPO_ARGS[*]} --state-dir $PB_STATE --max-rate 8M \
    --report $OUT/incr.json" /dev/null >"$PB_WORK/tty.out" 2>&1
pb_assert_eq "$(json "$OUT/incr.json" '["backup"]["type"]')" incr "the report names an incremental"
grep -q $'\rbackup: .* MiB (.*%), .* MB/s, files .* pages changed .*, ETA' "$PB_WORK/tty.out" &&
    pb_test_ok "on a terminal, a live progress line" ||
    pb_test_fail "no live line: $(head -c 600 "$PB_WORK/tty.out" | cat -v)"
# the incremental skips unchanged segments: its progress counts the bytes it plans to read
# (the last state drawn is 100%) and shows the skipped bytes apart
last=$(tr '\r' '\n' <"$PB_WORK/tty.out" | grep '^backup: ' | tail -n 1)
skipped=$(json "$OUT/incr.json" '["backup"]["bytes_skipped"]' 2>/dev/null)
if [ "${skipped:-0}" -gt 0 ]; then
    grep -q '(100%).*, skipped [0-9.]* MiB, ETA' <<<"$last" &&
        pb_test_ok "an incremental's progress ends at 100% of what it read, skipped bytes apart" ||
        pb_test_fail "progress of a skipping incremental (skipped $skipped bytes): $last"
else
    pb_test_fail "the incremental skipped nothing (report: $(json "$OUT/incr.json" '["backup"]'))"
fi
pb backup --quiet >"$PB_WORK/quiet.out" 2>"$PB_WORK/quiet.err"
pb_assert_eq "$?:$(grep -c 'INFO' "$PB_WORK/quiet.err"):$(wc -c <"$PB_WORK/quiet.out")" "0:0:0" \
    "--quiet: no info or progress lines, no summary line"

# 3. A failed backup still writes its report, with the error.
pb backup --dbname "host=$PB_WORK/sock port=1" --report "$OUT/fail.json" \
    --metrics-file "$OUT/fail.prom" >/dev/null 2>&1
pb_assert_eq "$?" 1 "a backup that cannot connect exits 1"
has_keys "$OUT/fail.json" $KEYS && pb_assert_eq "$(json "$OUT/fail.json" '["ok"]')" False \
    "the failed backup's report says so"
[ -n "$(json "$OUT/fail.json" '["error"]["message"]')" ] && pb_test_ok "it carries the error" ||
    pb_test_fail "no error in $(cat "$OUT/fail.json")"
grep -q '^pageback_run_success{[^}]*command="backup"} 0$' "$OUT/fail.prom" &&
    grep -q '^pageback_backup_last_success_timestamp_seconds{[^}]*type="full"}' "$OUT/fail.prom" &&
    pb_test_ok "metrics after a failure: the run failed, the last good backups still shown" ||
    pb_test_fail "metrics after failure: $(cat "$OUT/fail.prom")"

# 4. restore and verify reports.
mkdir -p "$PB_WORK/r" && chmod 700 "$PB_WORK/r" && _pb_chown_pg "$PB_WORK/r"
pb restore --target-dir "$PB_WORK/r" --report "$OUT/restore.json" >/dev/null 2>&1
pb_assert_eq "$?" 0 "restore succeeds"
w=$(json "$OUT/restore.json" '["restore"]["files_written"]')
[ "${w:-0}" -gt 0 ] && pb_test_ok "the restore's report counts $w files written" ||
    pb_test_fail "restore report: $(cat "$OUT/restore.json")"
pb verify --report "$OUT/verify.json" >/dev/null 2>&1
pb_assert_eq "$?:$(json "$OUT/verify.json" '["verify"]["problems"]')" "0:0" \
    "verify's report: no problems"

# verify and rebase show progress as backup and restore do (on a terminal the live line;
# --quiet none): verify of every backup counts backups, rebase counts files
for c in verify rebase; do
    _pb_as_pg script -qec "env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=postgres PGDATABASE=postgres \
        $PB_BIN $c ${PB_REPO_ARGS[*]} --state-dir $PB_STATE" /dev/null >"$PB_WORK/$c-tty.out" 2>&1
    unit=files
    [ $c = verify ] && unit=backups
    grep -q $'\r'"$c: .* MiB (100%), .* MB/s, $unit [0-9]*/[0-9]*, ETA" "$PB_WORK/$c-tty.out" &&
        pb_test_ok "$c: a live progress line on a terminal ($unit)" ||
        pb_test_fail "$c: no live line: $(head -c 600 "$PB_WORK/$c-tty.out" | cat -v)"
done
_pb_as_pg script -qec "env PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=postgres PGDATABASE=postgres \
    $PB_BIN verify --quiet ${PB_REPO_ARGS[*]} --state-dir $PB_STATE" /dev/null >"$PB_WORK/vq.out" 2>&1
grep -q $'\r'"verify: " "$PB_WORK/vq.out" && pb_test_fail "verify --quiet draws a progress line" ||
    pb_test_ok "verify --quiet: no progress line"

# 5. info --json follows docs/info.schema.json (no field missing, none undocumented).
pb info --json >"$PB_WORK/info.json"
python3 "$PB_SRCDIR/tests/integration/schema_check.py" "$PB_SRCDIR/docs/info.schema.json" \
    "$PB_WORK/info.json" >"$PB_WORK/schema.out" &&
    pb_test_ok "info --json follows docs/info.schema.json" ||
    pb_test_fail "info --json vs schema: $(head -5 "$PB_WORK/schema.out")"

# 6. archive-push failures are counted and show in the metrics.
pb archive-push "$PB_WORK/no-such-segment" >/dev/null 2>&1
pb info --metrics-file "$OUT/info.prom" >/dev/null 2>&1
grep -q '^pageback_archive_push_failures_total{[^}]*} 1$' "$OUT/info.prom" &&
    grep -Eq '^pageback_archive_push_last_success_timestamp_seconds\{[^}]*\} [1-9]' "$OUT/info.prom" &&
    pb_test_ok "metrics: one archive-push failure counted, the last success time known" ||
    pb_test_fail "archive metrics: $(grep archive "$OUT/info.prom")"

pb_test_summary
