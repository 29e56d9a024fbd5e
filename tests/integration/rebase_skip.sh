#!/bin/bash
# After a rebase (reading less): the synthetic full carries the mtime horizon and the per-file
# size, mtime and inode records of the newest backup it folds in, so the next file-mode
# incremental skips the segments nothing wrote since; a segment written after that
# newest backup (before the rebase, and after it) is still read, and so is one replaced
# under its name with the same size and mtime (a new inode); every restore equals the
# source; a verify scan afterwards finds no missed page.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_pgbench_source 1
psql_src() { pg_psql "$SRC" "$@" >/dev/null; }
for t in a b c; do
    psql_src "CREATE TABLE t_$t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 2000) g"
done
# Two tables of the same size whose files are swapped later under their names.
psql_src "CREATE TABLE t_x AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 2000) g"
psql_src "CREATE TABLE t_y AS SELECT g AS id, md5((g + 7)::text) AS v FROM generate_series(1, 2000) g"
psql_src "VACUUM FREEZE"
psql_src "CHECKPOINT"
sleep 1.2 # the rule's margin: files written in the second a backup starts are read again

declare -A DIGEST
LAST=
backup() {
    local out
    out=$(pb backup "$@" 2>&1) || { echo "$out" >&2; pb_test_fail "backup $* failed"; return 1; }
    LAST=$(pb_last_id)
    DIGEST[$LAST]=$(pg_digest_all "$SRC")
    echo "$out" >"$PB_WORK/backup-$LAST.out"
}
field() { pb_info_field "$1" "$2"; }
restore_check() {
    local d=$PB_WORK/r-$1
    if pb_restore_start "$d" --set "$1"; then
        pb_assert_eq "$(pg_digest_all "$d")" "${DIGEST[$1]}" "restore of $1 ($2): digests equal the source"
        pg_stop "$d"
    else
        pb_test_fail "restore of $1 ($2)"
    fi
    rm -rf "$d"
}

backup --type full
FULL_READ=$(pb_info_field "$LAST" bytes_read)
psql_src "UPDATE t_a SET v = 'one' WHERE id <= 10"
psql_src "CHECKPOINT"
sleep 1.2
backup --incremental-mode file --verify-scan 0
NEWEST=$LAST
pb_assert_eq "$(field "$NEWEST" read_mode)" file "the chain's incremental read in file mode"
# Written after the newest backup, before the rebase: the rebase cannot know.
psql_src "UPDATE t_b SET v = 'two' WHERE id <= 10"
psql_src "CHECKPOINT"

pb_check "rebase the chain" pb rebase
SYN=$(pb_last_id)
pb_assert_eq "${SYN:15:1}" S "rebase made a synthetic full"
DIGEST[$SYN]=${DIGEST[$NEWEST]}
pb_check "expire the chain under the synthetic full" pb expire --retain-full 1

# A file replaced under its name with the same size and mtime (only the inode tells):
# t_x's and t_y's files swapped with the server stopped, their mtimes put back. The
# synthetic full must carry the inodes for the skip rule to see it.
FX=$SRC/$(pg_psql "$SRC" "SELECT pg_relation_filepath('t_x')")
FY=$SRC/$(pg_psql "$SRC" "SELECT pg_relation_filepath('t_y')")
pg_stop "$SRC"
MX=$(stat -c %Y "$FX") MY=$(stat -c %Y "$FY")
pb_assert_eq "$(stat -c %s "$FX")" "$(stat -c %s "$FY")" "t_x and t_y have the same size"
mv "$FX" "$FX.swap" && mv "$FY" "$FX" && mv "$FX.swap" "$FY" &&
    touch -d "@$MX" "$FX" && touch -d "@$MY" "$FY" || pb_test_fail "swapping t_x and t_y"
pg_start "$SRC" || pb_die "source cluster did not restart"
pb_assert_eq "$(pg_psql "$SRC" "SELECT v FROM t_x WHERE id = 1")" "$(pg_psql "$SRC" "SELECT md5('8')")" \
    "t_x now holds t_y's rows"
# Written after the rebase.
psql_src "UPDATE t_c SET v = 'three' WHERE id <= 10"
psql_src "CHECKPOINT"
backup --incremental-mode file --verify-scan 0
NEXT=$LAST
pb_check "the next incremental did not read every page" \
    bash -c '! grep -q "incremental reads every page" "$1"' _ "$PB_WORK/backup-$NEXT.out"
pb_assert_eq "$(field "$NEXT" parent)" "$SYN" "the next incremental builds on the synthetic full"
pb_assert_eq "$(field "$NEXT" read_mode)" file "the next incremental reads in file mode"
SKIPPED=$(field "$NEXT" files_skipped)
pb_check "the next incremental skipped unchanged segments ($SKIPPED files)" test "$SKIPPED" -gt 0
READ=$(field "$NEXT" bytes_read)
pb_check "and read $READ B of a $FULL_READ B full (< 1/4)" test $((READ * 4)) -lt "$FULL_READ"
# t_b (written before the rebase), t_c (after it), t_x and t_y (replaced) must have been
# read: had any been skipped, the restore would hold its old rows (WAL from this backup's start cannot
# replay a change made before it).
pb_check "the changed pages were shipped ($(field "$NEXT" pages_changed))" \
    test "$(field "$NEXT" pages_changed)" -gt 0
restore_check "$NEXT" "incremental on the synthetic full: t_b, t_c, t_x, t_y read"
psql_src "UPDATE t_a SET v = 'verify' WHERE id = 7"
backup --incremental-mode file --verify-scan 1
pb_assert_eq "$(field "$LAST" pages_missed)" 0 "a verify scan after it finds no missed page"
pb_test_summary
