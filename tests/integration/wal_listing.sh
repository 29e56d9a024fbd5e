#!/bin/bash
# tests/integration/wal_listing.sh — info and --metrics-file count the archive's WAL as
# archive-get finds it: a segment at the key the archive gives its name
# (wal/<timeline>/<name>.zst). A copy of a segment at any other key under wal/ (a stray
# left by hand, a name in another timeline's directory), a .partial, a .backup or a
# history file is no segment of the archive and is not counted. No PostgreSQL needed:
# the objects are planted in a posix repository.
source "$(dirname "$0")/pb_lib.sh"
pb_tmpdir
R=$PB_WORK/r
ST=$PB_WORK/state
mkdir -p "$R/wal/00000001" "$R/wal/stray" "$R/wal/00000002" "$R/wal/history"
for s in 03 04 06; do
    echo x >"$R/wal/00000001/0000000100000000000000$s.zst"
done
echo x >"$R/wal/stray/000000010000000000000009.zst"
echo x >"$R/wal/00000002/00000001000000000000000A.zst"
echo x >"$R/wal/00000001/000000010000000000000007.partial.zst"
echo x >"$R/wal/00000001/000000010000000000000004.00000028.backup.zst"
echo x >"$R/wal/history/00000002.history.zst"

out=$("$PB_BIN" info --repo "$R" --state-dir "$ST" --metrics-file "$PB_WORK/m.prom" 2>&1)
pb_assert_eq "$(grep '^WAL timeline' <<<"$out")" \
    "WAL timeline 1: 000000010000000000000003 .. 000000010000000000000006, 3 segments, 1 gap" \
    "info counts the three archived segments of timeline 1 and their gap, no stray copy"
json=$("$PB_BIN" info --json --repo "$R" --state-dir "$ST")
wal=$(python3 -c 'import json,sys; w=json.loads(sys.argv[1])["wal"]; print(len(w), w[0]["segments"], w[0]["last"])' "$json")
pb_assert_eq "$wal" "1 3 000000010000000000000006" "info --json: one timeline, 3 segments, the last archived one"
pb_check "the metrics count 3 segments" \
    grep -Eq '^pageback_wal_archive_segments\{[^}]*\} 3$' "$PB_WORK/m.prom"
pb_check "the metrics' newest segment is 6, not a stray's" \
    grep -Eq '^pageback_wal_archive_newest_segment\{[^}]*timeline="1"\} 6$' "$PB_WORK/m.prom"
pb_test_summary
