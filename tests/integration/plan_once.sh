#!/bin/bash
# A backup plans from what it read once: backup/ is listed once per `pageback backup`
# (the cleanup of interrupted runs, the plan and the history share that listing), and
# each manifest of the parent's chain is read once whole at most (the chain check, the
# catalog rebuild and the file-level skip share one read; the parent's is kept in an
# unnamed local file). Counted with strace on a
# posix repository: the opens of the directory backup/ and of each backup/<id>/manifest.
source "$(dirname "$0")/pb_lib.sh"
[ "${PB_REPO_KIND:-posix}" = posix ] || { echo "posix repository only"; exit 0; }
strace -k -o /dev/null true 2>/dev/null ||
    { echo "FAIL strace with stack traces (-k) unavailable"; echo "0 passed, 1 failed"; exit 1; }
pb_setup
pb_report_dir
SRC=$PB_WORK/src
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
q() { pg_psql "$SRC" "$1" >/dev/null; }
REAL_BIN=$PB_BIN
cat >"$PB_WORK/traced" <<EOT
#!/bin/bash
exec strace -f -qq -k -e trace=openat -o "$OUT/trace" "$REAL_BIN" "\$@"
EOT
chmod 0755 "$PB_WORK/traced"
# traced ARGS...: one backup under strace; its opens in $OUT/trace.
traced() { PB_BIN=$PB_WORK/traced pb_backup_logged "$@"; }
# listings: how many listings of backup/ (repo_list, the posix driver's posix_list, opens
# the directory; the driver's own temp-file walk and directory syncs are not listings).
listings() { grep -E -A3 "openat\([^,]*, \"backup\", .*O_DIRECTORY" "$OUT/trace" | grep -c "(posix_list+"; }
# streams ID: the whole reads of backup/ID/manifest (a stream, a whole get or a local
# copy; the two small range reads of its header by chain_load_header are not).
streams() {
    grep -E -A6 "openat\([^,]*, \"backup/$1/manifest\"" "$OUT/trace" |
        grep -E "^ > .*\((chain_stream_open|chain_load|chain_copy_fetch)\+" | grep -c .
}
# headers ID: the reads of backup/ID/manifest's header alone (chain_load_header).
headers() {
    grep -E -A6 "openat\([^,]*, \"backup/$1/manifest\"" "$OUT/trace" |
        grep -cE "^ > .*\(chain_load_header\+"
}

q "CREATE TABLE t (n int)"
q "INSERT INTO t SELECT generate_series(1, 1000)"
pb_check "full" pb_backup_logged --type full --checkpoint fast
F=$(pb_last_id)
q "INSERT INTO t VALUES (1)"
pb_check "incremental 1 (traced)" traced --checkpoint fast
pb_log "backup/ listed $(listings) time(s); manifest of $F streamed $(streams "$F") time(s)"
pb_assert_eq "$(listings)" 1 "an incremental lists backup/ once"
pb_assert_eq "$(streams "$F")" 1 "an incremental streams its parent's manifest once"
I1=$(pb_last_id)
q "INSERT INTO t VALUES (2)"
pb_check "incremental 2 (traced)" traced --checkpoint fast
pb_log "backup/ listed $(listings) time(s); manifests streamed: $F $(streams "$F"), $I1 $(streams "$I1")"
pb_assert_eq "$(listings)" 1 "a second incremental lists backup/ once"
pb_assert_eq "$(streams "$F") $(streams "$I1")" "1 1" "a second incremental streams each manifest of its chain once"
# A lost catalog is rebuilt from the same streams that check the chain.
I2=$(pb_last_id)
rm -rf "$PB_STATE" && mkdir -p "$PB_STATE" && _pb_chown_pg "$PB_STATE"
q "INSERT INTO t VALUES (3)"
pb_check "incremental 3 with the catalog lost (traced)" traced --checkpoint fast
grep -q "rebuilding the catalog" "$PB_WORK/backup.out" &&
    pb_test_ok "the catalog is rebuilt" || pb_test_fail "the catalog was not rebuilt"
pb_log "manifests streamed: $F $(streams "$F"), $I1 $(streams "$I1"), $I2 $(streams "$I2")"
pb_assert_eq "$(streams "$F") $(streams "$I1") $(streams "$I2")" "1 1 1" \
    "a catalog rebuild streams each manifest of the chain once"
# --metrics-file takes the backups' figures from what the backup read, through the
# repository it holds open: no second opening, listing or header read.
q "INSERT INTO t VALUES (4)"
pb_check "incremental 4 with --metrics-file (traced)" traced --checkpoint fast --metrics-file "$OUT/m.prom"
I4=$(pb_last_id)
roots=$(grep -cE "openat\(AT_FDCWD, \"$PB_REPO/?\", .*O_DIRECTORY" "$OUT/trace")
pb_log "repository opened $roots time(s), backup/ listed $(listings) time(s), header of $F read $(headers "$F") time(s)"
pb_assert_eq "$roots $(listings) $(headers "$F")" "1 1 1" \
    "with --metrics-file the repository is opened, backup/ listed and each header read once"
pb_assert_eq "$(grep -E '^pageback_backups[{ ]' "$OUT/m.prom" | awk '{print $NF}')" 5 \
    "the metrics count the five backups"
stop=$(pb_info_field "$I4" stop_time)
grep -qE "^pageback_backup_last_success_timestamp_seconds\{.*type=\"incr\"\} $stop\$" "$OUT/m.prom" &&
    pb_test_ok "the newest incremental in the metrics is the one just taken" ||
    pb_test_fail "the metrics do not show $I4 (stop time $stop) as the newest incremental"
pb_check "verify" pb verify
pg_stop "$SRC"
pb_test_summary
