#!/bin/bash
# Usage errors exit 2 with one message style ("pageback: ERROR: ..."), whether the
# option parser finds them or the command does: an unreadable recovery target, a
# --set naming no backup (verify, restore, rebase), a bad --archive-timeout, an unknown
# option. A backup that exists but is damaged stays a failure (1), not a usage error.
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
R=$PB_WORK/r
mkdir -p "$R"
run() {
    "$PB_BIN" "$@" >"$PB_WORK/out" 2>"$PB_WORK/err"
    rc=$?
    err=$(cat "$PB_WORK/err")
}
# usage LABEL PATTERN ARGS...: exit 2, one stderr line "pageback: ERROR: " matching PATTERN.
usage() {
    local label=$1 pat=$2
    shift 2
    run "$@"
    if [ "$rc" = 2 ] && [ "$(wc -l <<<"$err")" = 1 ] &&
        grep -Eq -- "^pageback: ERROR: .*$pat" <<<"$err"; then
        pb_test_ok "$label"
    else
        pb_test_fail "$label: exit $rc, stderr: $err"
    fi
}
usage "--target-time yesterday" "cannot read --target-time 'yesterday'" \
    restore --repo "$R" --target-dir "$PB_WORK/t" --target-time yesterday
usage "--target-lsn zz" "cannot read --target-lsn 'zz'" \
    restore --repo "$R" --target-dir "$PB_WORK/t" --target-lsn zz
usage "--target-xid abc" "--target-xid expects a transaction id" \
    restore --repo "$R" --target-dir "$PB_WORK/t" --target-xid abc
usage "verify --set nosuch" "--set nosuch: no such backup in repository $R" \
    verify --repo "$R" --set nosuch
usage "restore --set of an id not in the repository" \
    "--set 20260101-000000F: no such backup in repository $R" \
    restore --repo "$R" --target-dir "$PB_WORK/t" --set 20260101-000000F
usage "rebase --set nosuch" "--set nosuch: no such backup" rebase --repo "$R" --set nosuch
usage "an unknown option, found by the parser" "unknown option --no-such for verify" \
    verify --repo "$R" --no-such
usage "check --archive-timeout soon" "--archive-timeout must be 1..86400 seconds" \
    check --repo "$R" --archive-timeout soon
[ ! -e "$PB_WORK/t" ] && pb_test_ok "nothing was written for a usage error" ||
    pb_test_fail "$PB_WORK/t was created"
pb_test_summary
