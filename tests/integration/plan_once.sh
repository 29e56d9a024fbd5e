#!/bin/bash
# A backup plans from what it read once: backup/ is listed once per `pageback backup`
# (the cleanup of interrupted runs, the plan and the history share that listing), and
# each manifest of the parent's chain is read once whole at most (the chain check, the
# catalog rebuild and the file-level skip share one stream). Counted with strace on a
# posix repository: the opens of the directory backup/ and of each backup/<id>/manifest.
source "$(dirname "$0")/pb_lib.sh"
[ "${PB_REPO_KIND:-posix}" = posix ] || { echo "posix repository only"; exit 0; }
strace -k -o /dev/null true 2>/dev/null || { echo "strace with stack traces (-k) unavailable: skipped"; exit 0; }
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
# opens PATTERN: how many successful opens of a path matching PATTERN (relative to the
# repository's directory) the traced run made.
opens() { grep -E "openat\([^,]*, \"$1\"" "$OUT/trace" | grep -vc "= -1"; }

q "CREATE TABLE t (n int)"
q "INSERT INTO t SELECT generate_series(1, 1000)"
pb_check "full" pb_backup_logged --type full --checkpoint fast
F=$(pb_last_id)
q "INSERT INTO t VALUES (1)"
pb_check "incremental 1 (traced)" traced --checkpoint fast
pb_log "backup/ opened $(opens backup) time(s); manifest of $F $(opens "backup/$F/manifest") time(s)"
grep -E -A7 "manifest\"" "$OUT/trace" | grep -E "manifest\"|pageback\(" | sed -e "s/.*pageback(//" -e "s/+.*//" -e "s/.*openat(4, //" >&2
pb_assert_eq "$(opens backup)" 1 "an incremental lists backup/ once"
I1=$(pb_last_id)
q "INSERT INTO t VALUES (2)"
pb_check "incremental 2 (traced)" traced --checkpoint fast
pb_log "backup/ opened $(opens backup) time(s); manifests: $F $(opens "backup/$F/manifest"), $I1 $(opens "backup/$I1/manifest")"
pb_assert_eq "$(opens backup)" 1 "a second incremental lists backup/ once"
pg_stop "$SRC"
pb_test_summary
