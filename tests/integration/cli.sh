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
               target-end target-exclusive target-action target-timeline tablespace-map jobs"
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
pb_assert_eq "$err" "pageback: unknown option --no-such-option for backup (see pageback backup --help)" \
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

pb_test_summary
