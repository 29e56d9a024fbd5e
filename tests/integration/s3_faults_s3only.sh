#!/bin/bash
# S3 repository faults (run with PB_REPO_KIND=s3): the S3 server goes away in the
# middle of a backup; the backup fails cleanly naming the object, leaves no visible
# half-backup, and the next backup (server back) succeeds and restores exactly.
source "$(dirname "$0")/pb_lib.sh"
[ "$PB_REPO_KIND" = s3 ] || { echo "0 passed, 0 failed"; exit 0; }
pb_setup
pb_source_pgbench "${PB_SCALE:-5}"

pb_check "full backup to S3" pb backup --type full
FIRST=$(pb_last_id)
pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid % 50 = 0" >/dev/null

PROXY_PID=$(sed -n 5p "$PB_S3_DIR/pids")
PROXY_CMD=(/usr/bin/python3 "$PB_SRCDIR/tests/s3server/launch.py" "$PB_S3_DIR/etc" proxy
           "$PB_S3_DIR/etc/proxy-server.conf")
# A throttled backup (~8 s of reading) loses its S3 server after 2 s.
pb backup --type full --max-rate 12M --s3-retries 3 >"$PB_WORK/outage.out" 2>&1 &
BPID=$!
sleep 2
kill "$PROXY_PID"
while kill -0 "$PROXY_PID" 2>/dev/null; do sleep 0.1; done
wait "$BPID"
RC=$?
OUT=$(cat "$PB_WORK/outage.out")
[ "$RC" != 0 ] && pb_test_ok "the backup fails when the S3 server goes away (exit $RC)" ||
    pb_test_fail "the backup should have failed"
if echo "$OUT" | grep -qE "s3://[^ ]+.*(attempt|connect|refused|Couldn't)"; then
    pb_test_ok "the error names the object and the transport failure"
else
    pb_test_fail "unclear error: $(echo "$OUT" | grep ERROR)"
fi
echo "$OUT" | grep ERROR | head -n 2

# Bring the proxy back on the same port.
"${PROXY_CMD[@]}" </dev/null >>"$PB_S3_DIR/log/proxy.log" 2>&1 &
sed -i "5s/.*/$!/" "$PB_S3_DIR/pids"
/usr/bin/python3 "$PB_SRCDIR/tests/s3server/s3tool.py" wait "$PB_S3_DIR" 60 ||
    pb_die "the S3 proxy did not come back"

pb_assert_eq "$(pb_last_id)" "$FIRST" "no half-backup is visible after the outage"
pb_check "the next backup succeeds" pb backup
LAST=$(pb_last_id)
DIGEST=$(pg_digest_all "$SRC")
pb_check "verify the new backup" pb verify --set "$LAST"
if pb_restore_start "$PB_WORK/r" --set "$LAST"; then
    pb_assert_eq "$(pg_digest_all "$PB_WORK/r")" "$DIGEST" "the backup after the outage restores exactly"
else
    pb_test_fail "restore after the outage"
fi

# A wrong secret is an authentication error, not a retry loop.
printf 's3-key = test:tester\ns3-secret = wrong\n' >"$PB_WORK/bad.conf"
chmod 600 "$PB_WORK/bad.conf"
OUT=$("$PB_BIN" info --repo "$PB_REPO" --s3-endpoint "$S3_ENDPOINT" --config "$PB_WORK/bad.conf" 2>&1)
echo "$OUT" | grep -qiE "signature|403|auth" && pb_test_ok "a wrong secret is reported as an authentication failure" ||
    pb_test_fail "wrong secret: $OUT"
chmod 644 "$PB_WORK/bad.conf"
OUT=$("$PB_BIN" info --repo "$PB_REPO" --s3-endpoint "$S3_ENDPOINT" --config "$PB_WORK/bad.conf" 2>&1)
echo "$OUT" | grep -q "readable by others" && pb_test_ok "a config file with a secret readable by others is refused" ||
    pb_test_fail "world-readable secret accepted: $OUT"
pb_test_summary
