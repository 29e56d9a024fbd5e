#!/bin/bash
# archive-push checks a segment's first page header against its name before storing it.
# pg_wal keeps recycled segments under future names, still holding older WAL; pushed
# by hand (a dead server's "what is left in pg_wal"), one would be stored under the
# name of a segment the server has not written yet, and when the server later fills
# and archives the real one, archive-push refuses it as DIFFERENT content, for good.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster "autovacuum = off"
pg_psql "$SRC" "CREATE TABLE t (id int, v text)" >/dev/null
pb_check "first segment archived (the repository records the cluster)" pb_archive_all "$SRC"

archived() { find "$PB_REPO" -name "$1*" -not -name "*.tmp.*" | grep -q .; }
segname() { pg_psql "$SRC" "SELECT pg_walfile_name_offset(pg_current_wal_lsn())" |
    sed 's/^(\([0-9A-F]*\),.*/\1/'; }

# 1. A recycled segment, made deterministically: the segment being written now (its
# header says where it is) copied under the name of a segment three further on, as
# recycling renames an old one.
CUR=$(segname)
TLI=${CUR:0:8} LOG=$((16#${CUR:8:8})) SEG=$((16#${CUR:16:8}))
FUT=$(printf '%s%08X%08X' "$TLI" "$LOG" $((SEG + 3)))
HAND=$PB_WORK/by-hand
mkdir -p "$HAND" && cp "$SRC/pg_wal/$CUR" "$HAND/$FUT" && _pb_chown_pg "$HAND"
out=$(pb archive-push "$HAND/$FUT" 2>&1)
rc=$?
pb_log "archive-push of $CUR's content as $FUT: exit $rc: $out"
if [ $rc != 0 ] && grep -q "$FUT" <<<"$out" && grep -q "expected" <<<"$out" &&
    grep -q "recycled" <<<"$out"; then
    pb_test_ok "a recycled segment is refused, naming the file, expected and found"
else
    pb_test_fail "archive-push of a recycled segment: exit $rc: $out"
fi
archived "$FUT" && pb_test_fail "$FUT was stored" || pb_test_ok "nothing was stored as $FUT"

# 2. A real recycled file of pg_wal, when the checkpoint left one (min_wal_size).
for i in 1 2 3 4 5 6; do
    pg_psql "$SRC" "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g" \
        >/dev/null
    pb_archive_all "$SRC" >/dev/null || break
done
pg_psql "$SRC" "CHECKPOINT" >/dev/null
NOW=$(segname)
REAL=$(cd "$SRC/pg_wal" && ls | grep -E '^[0-9A-F]{24}$' | awk -v n="$NOW" '$0 > n' | tail -n 1)
if [ -n "$REAL" ]; then
    out=$(pb archive-push "$SRC/pg_wal/$REAL" 2>&1)
    rc=$?
    [ $rc != 0 ] && grep -q "another segment" <<<"$out" &&
        pb_test_ok "pg_wal's recycled $REAL (current $NOW) is refused" ||
        pb_test_fail "pg_wal's recycled $REAL: exit $rc: $out"
else
    pb_log "no recycled segment in pg_wal after the checkpoint (current $NOW): part 2 skipped"
fi

# 3. Archiving goes on: the server fills segment FUT (and any later) and archives it.
pb_check "the server's own $FUT is archived later" pb_archive_all "$SRC"
until [[ "$(segname)" > "$FUT" ]]; do
    pg_psql "$SRC" "INSERT INTO t VALUES (0, 'x')" >/dev/null
    pb_archive_all "$SRC" >/dev/null || break
done
pb_check "archiving past $FUT succeeds" pb_archive_all "$SRC"
archived "$FUT" && pb_test_ok "$FUT is archived, from the server" ||
    pb_test_fail "$FUT is not archived"
failed=$(pg_psql "$SRC" "SELECT failed_count FROM pg_stat_archiver")
pb_assert_eq "$failed" 0 "archive_command never failed"

# 4. A file that is not WAL at all, and a segment of the right name but another size.
head -c 16777216 /dev/zero >"$HAND/$(printf '%s%08X%08X' "$TLI" "$LOG" $((SEG + 40)))"
cp "$SRC/pg_wal/$NOW" "$HAND/x" && truncate -s 8M "$HAND/x"
mv "$HAND/x" "$HAND/$NOW"
_pb_chown_pg "$HAND"
for f in "$HAND"/0*; do
    out=$(pb archive-push "$f" 2>&1) && pb_test_fail "$(basename "$f") accepted" ||
        pb_test_ok "$(basename "$f") refused: $(tail -n 1 <<<"$out" | cut -c1-160)"
done
pg_stop "$SRC"
pb_test_summary
