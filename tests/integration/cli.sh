#!/bin/bash
# tests/integration/cli.sh — the program's own surface, no PostgreSQL needed: help is
# asked for (exit 0, usage on stdout, no repository needed) versus a usage error (exit
# 2, one line on stderr naming the problem), --version, `tune` prints the I/O plan a
# backup would use, the configuration file (sections, precedence, masking, refusal of a
# file others may write), and the --report JSON / --metrics-file Prometheus outputs.
source "$(dirname "$0")/lib.sh"
PB_BIN=${PB_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/pageback}
[ -x "$PB_BIN" ] || pb_die "no pageback binary at $PB_BIN (set PB_BIN)"
pb_tmpdir
unset PAGEBACK_REPO PAGEBACK_CONFIG PAGEBACK_STATE_DIR PAGEBACK_S3_ENDPOINT PAGEBACK_CLUSTER
export PAGEBACK_STATE_DIR=$PB_WORK/state

# run ARGS...: sets rc, out (stdout) and err (stderr) of one pageback run.
run() {
    "$PB_BIN" "$@" >"$PB_WORK/out" 2>"$PB_WORK/err"
    rc=$?
    out=$(cat "$PB_WORK/out")
    err=$(cat "$PB_WORK/err")
}

# 1. Global help: every command listed, on stdout, exit 0.
for form in help --help; do
    run $form
    pb_assert_eq "$rc" 0 "pageback $form exits 0"
    for c in backup restore archive-push archive-get info verify expire rebase tune; do
        grep -q "^  $c " <<<"$out" ||
            pb_test_fail "pageback $form does not list $c"
    done
    pb_assert_eq "$err" "" "pageback $form writes nothing to stderr"
done

# 2. One command's help: its usage only, exit 0, with no repository configured.
for c in backup restore archive-push archive-get info verify expire rebase tune; do
    run "$c" --help
    pb_assert_eq "$rc" 0 "pageback $c --help exits 0"
    pb_check "pageback $c --help prints the $c usage" \
        grep -q "^usage: pageback $c \[options\]" "$PB_WORK/out"
    others=$(grep -cE "^  (backup|restore|archive-(push|get)|info|verify|expire|rebase|tune) " \
        "$PB_WORK/out")
    pb_assert_eq "$others" 1 "pageback $c --help shows one command"
done
run backup --help
grep -q -- "--read-size" <<<"$out" && grep -q -- "--repo" <<<"$out" &&
    pb_test_ok "backup --help names its options and the common ones" ||
    pb_test_fail "backup --help lacks --read-size or --repo: $out"
# Each command's help lists each of its options with a meaning (and the common ones,
# and the exit codes).
declare -A opts_of=(
    [backup]="type pgdata dbname read-size queue-depth no-uring no-direct on-checksum-error
              compress-level full-every full-after wal-timeout max-rate nice progress-interval"
    [restore]="target-dir set delta force target-time target-lsn target-xid target-name
               target-end target-exclusive target-action target-timeline tablespace-map jobs db-include
               progress-interval"
    [archive-push]="" [archive-get]="" [info]="json dbname" [verify]="set jobs"
    [expire]="retain-full" [rebase]="set compress-level" [tune]="pgdata read-size queue-depth"
    [config]="")
for c in "${!opts_of[@]}"; do
    run "$c" --help
    missing=""
    for opt in ${opts_of[$c]} repo config cluster report metrics-file log-level log-file quiet; do
        grep -Eq -- "^  --$opt( [^ ]+)? +[^ ]" <<<"$out" ||
            grep -Eq -- "^  --$opt( [^ ]+)?$" <<<"$out" || missing+=" --$opt"
    done
    grep -q "^exit status: 0 success; 1 .*; 2 usage" <<<"$out" || missing+=" (exit status)"
    [ "$rc" = 0 ] && [ -z "$missing" ] && pb_test_ok "$c --help lists its options and exit codes" ||
        pb_test_fail "$c --help (rc $rc) lacks:$missing"
done
run backup --help
grep -q -- "--target-dir" <<<"$out" && pb_test_fail "backup --help lists restore's --target-dir" ||
    pb_test_ok "backup --help does not list another command's options"
grep -Eq -- "--compress-level N +zstd level, 1..19 \[default: 1\]" <<<"$out" &&
    pb_test_ok "an option's line carries its meaning and default" ||
    pb_test_fail "no meaning/default for --compress-level: $out"

# --version: one line, exit 0, anywhere.
for form in "--version" "version" "backup --version"; do
    run $form
    [ "$rc" = 0 ] && grep -Eq "^pageback [0-9]+\.[0-9]+" <<<"$out" && [ "$(wc -l <<<"$out")" = 1 ] &&
        pb_test_ok "pageback $form prints the version" ||
        pb_test_fail "pageback $form: rc $rc, $out $err"
done
run help restore
pb_check "pageback help restore prints the restore usage" \
    grep -q "^usage: pageback restore \[options\]" "$PB_WORK/out"
run backup --repo "$PB_WORK/r" --help --type full
pb_assert_eq "$rc" 0 "--help among other options still exits 0"

# 3. Usage errors: exit 2, message and global usage on stderr, nothing on stdout.
run nosuch --help
pb_assert_eq "$rc" 2 "help for an unknown command is a usage error"
grep -q "unknown command 'nosuch'" <<<"$err" && pb_test_ok "it names the command" ||
    pb_test_fail "no 'unknown command' message: $err"
run nosuch --repo "$PB_WORK/r"
pb_assert_eq "$rc" 2 "an unknown command exits 2"
run backup --type sometimes --repo "$PB_WORK/r"
pb_assert_eq "$rc" 2 "a bad value exits 2"
grep -q -- "--type must be full or incr" <<<"$err" && [ "$(wc -l <<<"$err")" = 1 ] &&
    pb_test_ok "the bad value is named in one line" ||
    pb_test_fail "unexpected stderr: $err"
pb_assert_eq "$out" "" "a usage error writes nothing to stdout"
run backup --no-such-option --repo "$PB_WORK/r"
pb_assert_eq "$rc" 2 "an unknown option exits 2"
pb_assert_eq "$err" "pageback: ERROR: unknown option --no-such-option for backup (see pageback backup --help)" \
    "an unknown option is named with its command, in one line"
run backup --repo "$PB_WORK/r" --target-dir /tmp/x
pb_assert_eq "$rc" 2 "an option of another command exits 2"
grep -q "option --target-dir is not for backup" <<<"$err" && [ "$(wc -l <<<"$err")" = 1 ] &&
    pb_test_ok "a misplaced option is named in one line" || pb_test_fail "misplaced: $err"
run info --repo
pb_assert_eq "$rc" 2 "an option without its value exits 2"
grep -q "option --repo for info needs a value" <<<"$err" && pb_test_ok "the missing value is named" ||
    pb_test_fail "missing value: $err"
run --repo "$PB_WORK/r" backup
grep -q "the command comes first" <<<"$err" && [ "$rc" = 2 ] &&
    pb_test_ok "options before the command: one line saying the command comes first" ||
    pb_test_fail "options first: rc $rc $err"
run info
pb_assert_eq "$rc" 2 "a command without a repository exits 2"
grep -q "no repository" <<<"$err" && pb_test_ok "it says no repository" ||
    pb_test_fail "no 'no repository' message: $err"
run
pb_assert_eq "$rc" 2 "no command at all exits 2"

# 4. tune: the I/O plan a backup with the same options would use.
mkdir -p "$PB_WORK/pgdata"
run tune --pgdata "$PB_WORK/pgdata"
pb_assert_eq "$rc" 0 "tune exits 0 without a repository"
[ "$(tail -c 1 "$PB_WORK/out" | od -An -c | tr -d ' ')" = '\n' ] &&
    pb_test_ok "tune ends with a newline" || pb_test_fail "tune's output lacks a final newline"
grep -Eq "^read size +[0-9]+ KiB" <<<"$out" && grep -Eq "^queue depth +[0-9]+" <<<"$out" &&
    pb_test_ok "tune prints a read size and a queue depth" || pb_test_fail "tune said: $out"
run tune --pgdata "$PB_WORK/pgdata" --read-size 256K --queue-depth 3
grep -Eq "^read size +256 KiB +\(given with --read-size\)" <<<"$out" &&
    grep -Eq "^queue depth +3 +\(given with --queue-depth\)" <<<"$out" &&
    pb_test_ok "tune shows the settings given, as the backup would use them" ||
    pb_test_fail "tune ignored the given settings: $out"

# 5. info ends with a newline; info --json is JSON.
mkdir -p "$PB_WORK/r"
for form in "" --json; do
    run info --repo "$PB_WORK/r" $form
    [ "$rc" = 0 ] && [ "$(tail -c 1 "$PB_WORK/out" | od -An -c | tr -d ' ')" = '\n' ] &&
        pb_test_ok "info $form ends with a newline" || pb_test_fail "info $form: rc $rc, no newline"
done
run info --repo "$PB_WORK/r" --json
python3 -m json.tool "$PB_WORK/out" >/dev/null && pb_test_ok "info --json is valid JSON" ||
    pb_test_fail "info --json: $out"
mkdir -p "$PB_WORK/a \"quoted\" \\ repo"
run info --repo "$PB_WORK/a \"quoted\" \\ repo" --json
python3 -m json.tool "$PB_WORK/out" >/dev/null && pb_test_ok "info --json escapes the repository path" ||
    pb_test_fail "info --json with a quote in the path: $out"

# 6. Configuration: sections, precedence flag > environment > [cluster:NAME] > [global]
#    > default, each setting's source in `config check`, secrets masked, a file others
#    may write refused, a bad line named as file:line.
cat >"$PB_WORK/pb.conf" <<CONF
# global settings
repo = $PB_WORK/r
compress-level = 2
queue-depth = 5
s3-secret = very-secret-value
[cluster:main]
compress-level = 3
read-size = 1M
[spare]
repo = $PB_WORK/spare
CONF
chmod 600 "$PB_WORK/pb.conf"
setting() { grep -E "^$1 +=" <<<"$out" | sed -E 's/^[^=]+= +//; s/ +#/ #/'; }
run config check --config "$PB_WORK/pb.conf"
pb_assert_eq "$rc" 0 "config check exits 0"
pb_assert_eq "$(setting compress-level)" "2 # config [global]" "global section applies"
pb_assert_eq "$(setting nice)" "10 # default" "an unset option shows its default"
run config check --config "$PB_WORK/pb.conf" --cluster main
pb_assert_eq "$(setting compress-level)" "3 # config [cluster]" \
    "the cluster's section wins over global"
pb_assert_eq "$(setting queue-depth)" "5 # config [global]" \
    "global fills what the cluster's section lacks"
PAGEBACK_COMPRESS_LEVEL=4 run config check --config "$PB_WORK/pb.conf" --cluster main
pb_assert_eq "$(setting compress-level)" "4 # environment" \
    "PAGEBACK_COMPRESS_LEVEL wins over the file"
PAGEBACK_COMPRESS_LEVEL=4 PAGEBACK_CONFIG=$PB_WORK/pb.conf PAGEBACK_CLUSTER=main \
    run config check --compress-level 6
pb_assert_eq "$(setting compress-level)" "6 # command line" "a flag wins over everything"
pb_assert_eq "$(setting read-size)" "1M # config [cluster]" \
    "PAGEBACK_CONFIG and PAGEBACK_CLUSTER choose the file and section"
run config check --config "$PB_WORK/pb.conf" --cluster spare
pb_assert_eq "$(setting repo)" "$PB_WORK/spare # config [cluster]" "[NAME] is a cluster section too"
run config check --config "$PB_WORK/pb.conf"
grep -q "very-secret-value" <<<"$out$err" && pb_test_fail "config check printed the secret" ||
    pb_test_ok "config check does not print the secret"
grep -Eq "^s3-secret +=.*masked.*# config \[global\]" <<<"$out" &&
    pb_test_ok "the secret shows as masked, with its source" || pb_test_fail "secret line: $out"
AWS_SECRET_ACCESS_KEY=env-secret-value run config check --repo "$PB_WORK/r"
grep -q "env-secret-value" <<<"$out" && pb_test_fail "an environment secret printed" ||
    pb_test_ok "a secret from the environment is masked too"
run config check --config "$PB_WORK/pb.conf" --cluster nosuch
pb_assert_eq "$rc" 2 "an unknown cluster exits 2"
grep -q "nosuch" <<<"$err" && pb_test_ok "it names the cluster" || pb_test_fail "cluster: $err"
grep -v s3-secret "$PB_WORK/pb.conf" >"$PB_WORK/open.conf"
for mode in 666 664 646; do
    chmod "$mode" "$PB_WORK/open.conf"
    run config check --config "$PB_WORK/open.conf"
    [ "$rc" = 2 ] && grep -q "may be written by" <<<"$err" &&
        pb_test_ok "a config file of mode $mode (others may write) is refused" ||
        pb_test_fail "mode $mode accepted: rc $rc $err"
    run info --config "$PB_WORK/open.conf"
    pb_assert_eq "$rc" 2 "every command refuses a config file of mode $mode"
done
chmod 644 "$PB_WORK/open.conf"
run config check --config "$PB_WORK/open.conf"
pb_assert_eq "$rc" 0 "a 0644 file without secrets is accepted"
printf 'repo = /r\n\n[cluster:x]\nthis line has no equals\n' >"$PB_WORK/bad.conf"
run config check --config "$PB_WORK/bad.conf"
[ "$rc" = 2 ] && grep -q "bad.conf:4:" <<<"$err" && pb_test_ok "a bad line is named as file:line" ||
    pb_test_fail "bad line: rc $rc $err"
printf 'repo = /r\ncompres-level = 3\n' >"$PB_WORK/bad.conf"
run config check --config "$PB_WORK/bad.conf"
[ "$rc" = 2 ] && grep -q "bad.conf:2: unknown setting 'compres-level'" <<<"$err" &&
    pb_test_ok "an unknown setting is named as file:line" || pb_test_fail "unknown setting: $err"
PAGEBACK_QUEUE_DEPTH=0 run info --repo "$PB_WORK/r"
[ "$rc" = 2 ] && grep -q "PAGEBACK_QUEUE_DEPTH" <<<"$err" &&
    pb_test_ok "a bad PAGEBACK_* value names the variable" || pb_test_fail "env: $err"

# 7. --report: valid JSON with the required keys, on success and on failure (with the
#    error), written atomically (no temp file left); --metrics-file: Prometheus text.
report_keys() { # FILE KEY...: exit 0 when FILE is JSON holding every KEY
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
missing = [k for k in sys.argv[2:] if k not in d]
sys.exit(1 if missing else 0)
PY
}
json_value() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(eval("d"+sys.argv[2])))' "$@"; }
keys="report_version command exit_status ok error started_at duration_seconds cpu_user_seconds
      cpu_system_seconds peak_rss_bytes page_cache_bytes_left adaptive_io limits"
run info --repo "$PB_WORK/r" --report "$PB_WORK/ok.json"
[ "$rc" = 0 ] && report_keys "$PB_WORK/ok.json" $keys &&
    pb_test_ok "a successful run's report is JSON with the required keys" ||
    pb_test_fail "report on success: rc $rc $(cat "$PB_WORK/ok.json" 2>&1)"
pb_assert_eq "$(json_value "$PB_WORK/ok.json" '["ok"]') $(json_value "$PB_WORK/ok.json" '["exit_status"]')" \
    "true 0" "the report says ok, exit status 0"
rss=$(json_value "$PB_WORK/ok.json" '["peak_rss_bytes"]')
[ "${rss:-0}" -gt 1000000 ] && pb_test_ok "the report carries the peak RSS ($rss bytes)" ||
    pb_test_fail "peak RSS: $rss"
run info --repo "$PB_WORK/no-such-repo" --report "$PB_WORK/fail.json"
[ "$rc" = 1 ] && report_keys "$PB_WORK/fail.json" $keys &&
    pb_test_ok "a failed run still writes its report" ||
    pb_test_fail "report on failure: rc $rc $(cat "$PB_WORK/fail.json" 2>&1)"
pb_assert_eq "$(json_value "$PB_WORK/fail.json" '["ok"]') $(json_value "$PB_WORK/fail.json" '["exit_status"]')" \
    "false 1" "the failed report says so, with exit status 1"
grep -q "no-such-repo" <<<"$(json_value "$PB_WORK/fail.json" '["error"]["message"]')" &&
    pb_test_ok "the failed report carries the error naming the repository" ||
    pb_test_fail "error in report: $(cat "$PB_WORK/fail.json")"
run backup --repo "$PB_WORK/r" --type sometimes --report "$PB_WORK/usage.json"
pb_assert_eq "$(json_value "$PB_WORK/usage.json" '["exit_status"]' 2>&1)" 2 \
    "a usage error is reported too, with exit status 2"
ls "$PB_WORK"/*.tmp.* >/dev/null 2>&1 && pb_test_fail "a report temp file was left behind" ||
    pb_test_ok "no report temp file left behind"
run info --repo "$PB_WORK/r" --report "$PB_WORK/nodir/x.json"
[ "$rc" = 1 ] && grep -q "nodir/x.json" <<<"$err" &&
    pb_test_ok "a report that cannot be written fails the run, naming the file" ||
    pb_test_fail "unwritable report: rc $rc $err"

prom_check() { # FILE: every line is Prometheus text exposition grammar
    python3 - "$1" <<'PY'
import re, sys
name = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
sample = re.compile(r'^(%s)(\{(%s)(,%s)*\})? [-+]?([0-9.eE+-]+|NaN|Inf)( -?[0-9]+)?$' % (name, label, label))
meta = re.compile(r'^# (HELP %s .*|TYPE %s (counter|gauge|histogram|summary|untyped))$' % (name, name))
lines = open(sys.argv[1]).read().split('\n')
if lines[-1] != '':
    sys.exit('no final newline')
bad = [l for l in lines[:-1] if not (sample.match(l) or meta.match(l))]
samples = [l for l in lines if sample.match(l)]
if bad or not samples:
    sys.exit('bad lines: %r' % bad[:3])
PY
}
run info --repo "$PB_WORK/r" --metrics-file "$PB_WORK/m.prom"
[ "$rc" = 0 ] && prom_check "$PB_WORK/m.prom" &&
    pb_test_ok "the metrics file parses as Prometheus text" || pb_test_fail "metrics: $(cat "$PB_WORK/m.prom" 2>&1)"
grep -q '^pageback_run_success{[^}]*command="info"} 1$' "$PB_WORK/m.prom" &&
    grep -q '^pageback_archive_push_failures_total{[^}]*} 0$' "$PB_WORK/m.prom" &&
    pb_test_ok "it has the run's outcome and the archive failure counter" ||
    pb_test_fail "metrics content: $(cat "$PB_WORK/m.prom")"
run archive-push "$PB_WORK/no-such-wal" --repo "$PB_WORK/r"
run info --repo "$PB_WORK/r" --metrics-file "$PB_WORK/m.prom"
grep -q '^pageback_archive_push_failures_total{[^}]*} 1$' "$PB_WORK/m.prom" &&
    pb_test_ok "a failed archive-push is counted in the state directory" ||
    pb_test_fail "archive failures: $(grep archive "$PB_WORK/m.prom")"

pb_test_summary
