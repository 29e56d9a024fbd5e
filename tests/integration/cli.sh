#!/bin/bash
# tests/integration/cli.sh — the program's own surface, no PostgreSQL needed: help is
# asked for (exit 0, usage on stdout, no repository needed) versus a usage error (exit
# 2, message and usage on stderr), and `tune` prints the I/O plan a backup would use.
source "$(dirname "$0")/lib.sh"
PB_BIN=${PB_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/pageback}
[ -x "$PB_BIN" ] || pb_die "no pageback binary at $PB_BIN (set PB_BIN)"
pb_tmpdir
unset PAGEBACK_REPO PAGEBACK_CONFIG PAGEBACK_STATE_DIR PAGEBACK_S3_ENDPOINT

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
grep -q -- "--type must be full or incr" <<<"$err" && grep -q "^usage:" <<<"$err" &&
    pb_test_ok "the bad value is named, usage follows on stderr" ||
    pb_test_fail "unexpected stderr: $err"
pb_assert_eq "$out" "" "a usage error writes nothing to stdout"
run backup --no-such-option --repo "$PB_WORK/r"
pb_assert_eq "$rc" 2 "an unknown option exits 2"
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
grep -Eq "^read size +[0-9]+ KiB" <<<"$out" && grep -Eq "^queue depth +[0-9]+" <<<"$out" &&
    pb_test_ok "tune prints a read size and a queue depth" || pb_test_fail "tune said: $out"
run tune --pgdata "$PB_WORK/pgdata" --read-size 256K --queue-depth 3
grep -Eq "^read size +256 KiB +\(given with --read-size\)" <<<"$out" &&
    grep -Eq "^queue depth +3 +\(given with --queue-depth\)" <<<"$out" &&
    pb_test_ok "tune shows the settings given, as the backup would use them" ||
    pb_test_fail "tune ignored the given settings: $out"

pb_test_summary
