#!/bin/bash
# A restore point that is not in the archive is refused naming where the search ended:
# at the end of the archived WAL that is the end of its last valid record. Here the
# archive ends with a segment that filled up on its own (no switch), whose last record
# runs on into the segment still being written: the search ends at that record's start,
# inside the last archived segment, not at the segment's boundary (which would claim
# WAL was read that was not).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
q() { pg_psql "$SRC" "$1"; }
pb_backup_logged --checkpoint fast || pb_die "full backup"
# WAL that fills segments by itself, then the segment before the current one archived.
q "CREATE TABLE big AS SELECT g, md5(g::text) AS v FROM generate_series(1, 300000) g" >/dev/null
PREV=$(q "SELECT pg_walfile_name(pg_current_wal_insert_lsn() - 16777216::numeric)")
for _ in $(seq 1 150); do
    [[ "$(q "SELECT coalesce(last_archived_wal, '')  FROM pg_stat_archiver")" > "$PREV" ]] ||
        [ "$(q "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")" = "$PREV" ] && break
    sleep 0.2
done
LAST=$(q "SELECT last_archived_wal FROM pg_stat_archiver")
[ -n "$LAST" ] || pb_die "nothing archived"
SEGNO=$((16#${LAST:16:8} + 16#${LAST:8:8} * 256))
pb_log "last archived segment $LAST (segment number $SEGNO)"

d=$PB_WORK/refused
mkdir -p "$d" && _pb_chown_pg "$d"
out=$(pb restore --target-dir "$d" --target-name rp_nowhere 2>&1)
END=$(sed -nE "s/.*searched from [0-9A-F]+\/[0-9A-F]+ to ([0-9A-F]+\/[0-9A-F]+) \(the end of the archived WAL\).*/\1/p" <<<"$out")
if [ -z "$END" ]; then
    pb_test_fail "no 'searched ... to X (the end of the archived WAL)' in: $out"
else
    hi=${END%/*} lo=${END#*/}
    at=$(( (16#$hi << 32) + 16#$lo ))
    seg=$((16 * 1024 * 1024))
    pb_log "the search ended at $END"
    pb_assert_eq "$((at / seg))" "$SEGNO" \
        "the end named ($END) is inside the last archived segment $LAST"
    pb_assert_ne "$((at % seg))" 0 "the end named is the last record's start, not a segment boundary"
fi
pb_test_summary
