#!/bin/bash
# A configuration line that cannot be parsed may hold a secret (an s3-secret line with
# a typo): the error, which reaches the PostgreSQL log through archive_command and the
# --report file, names the file, the line number and the key, never the value. Reports
# and metrics files are created 0600 (mkstemp, then renamed over the file), never
# through a temporary someone planted.
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
umask 022
REPO=$PB_WORK/repo
mkdir -p "$REPO"
WAL=$PB_WORK/000000010000000000000001
head -c 16777216 /dev/zero >"$WAL"

# bad_line LABEL SECRET LINE: a config whose second line is LINE; archive-push (as
# archive_command runs it) and config check must fail naming file:2 and the key, and
# neither their output nor the --report file may hold SECRET.
bad_line() {
    local label=$1 secret=$2 conf=$PB_WORK/c.conf out rc key
    key=$(sed 's/[^A-Za-z0-9_.-].*//' <<<"$3")
    printf '# pageback\n%s\nrepo = %s\n' "$3" "$REPO" >"$conf" && chmod 600 "$conf"
    for cmd in "archive-push $WAL" "config check"; do
        rm -f "$PB_WORK/report.json"
        # shellcheck disable=SC2086
        out=$("$PB_BIN" $cmd --config "$conf" --report "$PB_WORK/report.json" 2>&1)
        rc=$?
        if [ $rc = 0 ]; then
            pb_test_fail "$label ($cmd): accepted"
        elif grep -q -- "$secret" <<<"$out" || grep -q -- "$secret" "$PB_WORK/report.json"; then
            pb_test_fail "$label ($cmd): the value is shown: $out"
        elif ! grep -q -- "$conf:2" <<<"$out" || ! grep -q -- "$key" <<<"$out"; then
            pb_test_fail "$label ($cmd): $conf:2 or '$key' not named: $out"
        else
            pb_test_ok "$label ($cmd): file, line and key named, value not shown"
        fi
    done
}
bad_line "no '='" Zq7SECRETvalue1 "s3-secret: Zq7SECRETvalue1"
bad_line "space in the name" Zq7SECRETvalue2 "s3-secret Zq7SECRETvalue2 = x"
bad_line "colon in the name" Zq7SECRETvalue3 "s3-secret:Zq7SECRETvalue3=x"
bad_line "a switch's bad value" Zq7SECRETvalue4 "no-direct = Zq7SECRETvalue4"
bad_line "a bad choice" Zq7SECRETvalue5 "checkpoint = Zq7SECRETvalue5"

# Reports and metrics: 0600, also when an older file was 0644.
R=$PB_WORK/out/report.json M=$PB_WORK/out/metrics.prom
mkdir -p "$PB_WORK/out" && touch "$R" && chmod 644 "$R"
"$PB_BIN" info --repo "$REPO" --report "$R" --metrics-file "$M" >/dev/null 2>&1
pb_assert_eq "$(stat -c %a "$R" 2>&1)" 600 "the --report file is 0600"
pb_assert_eq "$(stat -c %a "$M" 2>&1)" 600 "the --metrics-file file is 0600"
# A link planted at the temporary name the old code used (report.tmp.<pid>).
V=$PB_WORK/victim R2=$PB_WORK/out/r2.json
echo "precious" >"$V"
( ln -s "$V" "$R2.tmp.$BASHPID" && exec "$PB_BIN" info --repo "$REPO" --report "$R2" \
    >/dev/null 2>&1 )
pb_assert_eq "$(cat "$V")" precious "a link planted at a predictable temporary name is not written through"
[ -f "$R2" ] && [ ! -L "$R2" ] && pb_test_ok "the report is a file of its own" ||
    pb_test_fail "the report $R2 is not a regular file"
pb_test_summary
