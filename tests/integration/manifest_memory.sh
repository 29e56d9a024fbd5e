#!/bin/bash
# A backup's manifest memory does not grow with the cluster (memory bounds): the backup writes
# its file records as it goes (engine/backup/backup_records.c) and an incremental reads its
# parent's records as a stream, so the records held at once (--report's
# io_applied.manifest_records_peak) are the same few with a few hundred files and with
# a few thousand, full and incremental alike, while the manifest itself grows. The
# chain of the large cluster is restored and compared with the source. A build that
# holds the whole manifest reports no such count (and would hold every record).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source 1
q() { pg_psql "$SRC" "$1" >/dev/null; }
pb_report_dir

# backup NAME ARGS...: one backup with --report $OUT/NAME.json (reads pinned: the test
# counts records, not the polite reader's pauses).
backup() {
    local name=$1 out
    shift
    out=$(pb backup --queue-depth 2 --report "$OUT/$name.json" "$@" 2>&1) ||
        { echo "$out" >&2; pb_test_fail "backup $name ($*) failed"; return 1; }
    pb_test_ok "backup $name ($*)"
}
records() { pb_json "$OUT/$1.json" '["io_applied"]["manifest_records_peak"]'; }
files() { pb_json "$OUT/$1.json" '["backup"]["files"]'; }
msize() { stat -c %s "$PB_REPO/backup/$(pb_json "$OUT/$1.json" '["backup"]["id"]')/manifest"; }

backup small-full --type full
q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 100 = 0"
backup small-incr
# A few thousand more files: 700 tables of one row, each a heap, its primary key and
# its TOAST table and index.
q "DO \$\$ BEGIN FOR i IN 1..700 LOOP
     EXECUTE format('CREATE TABLE many_%s (id int primary key, v text)', i);
     EXECUTE format('INSERT INTO many_%s VALUES (1, %L)', i, repeat('x', 100));
   END LOOP; END \$\$"
q "CHECKPOINT"
backup large-full --type full
q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 100 = 1"
q "UPDATE many_7 SET v = 'changed'"
backup large-incr
# what the restore must hold (a digest of 700 tables would cost more than the backups)
state() { pg_psql "$1" "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || '/' ||
    (SELECT count(*) FROM pg_class WHERE relname LIKE 'many_%') || '/' ||
    (SELECT v FROM many_7) || '/' || (SELECT length(v) FROM many_700)"; }
WANT=$(state "$SRC")

sf=$(files small-full) lf=$(files large-full)
[ "${sf:-0}" -gt 0 ] && [ "${lf:-0}" -ge $((sf + 2000)) ] &&
    pb_test_ok "the large cluster has thousands more files ($sf -> $lf)" ||
    pb_test_fail "file counts: small $sf, large $lf"
ss=$(msize small-full) ls=$(msize large-full)
[ "${ls:-0}" -gt $((${ss:-0} * 2)) ] && pb_test_ok "its manifest is larger ($ss -> $ls bytes)" ||
    pb_test_fail "manifest sizes: small $ss, large $ls"
for b in small-full small-incr large-full large-incr; do
    v=$(records $b)
    [ -n "$v" ] && [ "$v" -ge 1 ] && [ "$v" -le 4 ] &&
        pb_test_ok "$b: at most $v file records held at once" ||
        pb_test_fail "$b: manifest_records_peak '$v' (want 1..4: $(files $b) files)"
done
pb_assert_eq "$(records large-full)" "$(records small-full)" \
    "a full backup holds as many records with $lf files as with $sf"
pb_assert_eq "$(records large-incr)" "$(records small-incr)" \
    "an incremental holds as many records with $lf files as with $sf"
v=$(pb_json "$OUT/large-incr.json" '["io_applied"]["manifest_bytes_peak"]')
[ -n "$v" ] && [ "$v" -gt 0 ] && [ "$v" -le $((8 << 20)) ] &&
    pb_test_ok "large-incr: at most $v manifest bytes held (a few chunks' buffers)" ||
    pb_test_fail "large-incr: manifest_bytes_peak '$v'"

D=$PB_WORK/r1
if pb_restore_start "$D"; then
    pb_assert_eq "$(state "$D")" "$WANT" "restore of the large chain holds the source's rows"
    pg_stop "$D"
else
    pb_test_fail "restore of the large chain or its recovery failed"
fi
rm -rf "$D"
pb_test_summary
