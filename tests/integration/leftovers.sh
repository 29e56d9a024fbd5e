#!/bin/bash
# Leftovers of killed writers are removed by the next run, and only
# those of writers that are gone:
#   rebase and expire, once they hold the writer lock, remove what a killed rebase or
#   expire left (backup/<id>/ without a manifest, temp files), as backup does;
#   a manifest-less backup that a committed backup names as its parent is kept;
#   archive-push (no writer lock) removes the temp files of the segment it pushes whose
#   writer is gone (flock free), and keeps a live writer's.
# Deterministic and small (pgbench -s 1); the crash trials do the same at random.
source "$(dirname "$0")/pb_lib.sh"
if [ "$PB_REPO_KIND" != posix ]; then
    echo "leftovers: temp files and fault points are the posix driver's"
    echo "0 passed, 0 failed"
    exit 0
fi
pb_setup
pb_source_pgbench 1

# pbf SPEC CMD ARGS...: pageback as postgres with a fault point armed.
pbf() {
    local spec=$1
    shift
    _pb_as_pg env PAGEBACK_TEST_FAULT="$spec" PGHOST="$PGHOST" PGPORT="$PGPORT" \
        PGUSER=postgres PGDATABASE=postgres "$PB_BIN" "$1" "${PB_REPO_ARGS[@]}" \
        --state-dir "$PB_STATE" "${@:2}"
}
# backup directories without a manifest, and temp files, in the repository
orphans() {
    local d
    for d in "$PB_REPO"/backup/*/; do
        [ -d "$d" ] && [ ! -f "$d/manifest" ] && basename "$d"
    done
}
temps() { find "$PB_REPO" -name "${1:-*}.tmp.*" | sed "s|^$PB_REPO/||"; }
change() {
    pg_psql "$SRC" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = $1" \
        >/dev/null
}

pb_check "full backup" pb backup --type full
change 1
pb_check "incremental backup" pb backup

# 1. A rebase killed half way leaves its synthetic backup without a manifest; the next
#    rebase removes it before it writes its own.
pbf rebase.mid-pack:5 rebase >"$PB_WORK/out" 2>&1
pb_assert_eq "$?" 137 "rebase killed at rebase.mid-pack:5"
KILLED=$(orphans)
pb_assert_ne "$KILLED" "" "the killed rebase left a backup without a manifest"
pb rebase >"$PB_WORK/out" 2>&1 || pb_test_fail "rebase after the killed one: $(tail -n 1 "$PB_WORK/out")"
pb_assert_eq "$(orphans)" "" "the next rebase removed $KILLED"
pb_assert_eq "$(temps)" "" "no temp file is left"

# 2. An expire killed between a manifest and its packs (the old chain: incremental
#    first) leaves that backup without a manifest; the next expire removes it.
pbf drop.after-manifest expire --retain-full 1 >"$PB_WORK/out" 2>&1
pb_assert_eq "$?" 137 "expire killed at drop.after-manifest"
KILLED=$(orphans)
pb_assert_ne "$KILLED" "" "the killed expire left a backup without a manifest"
pb expire --retain-full 1 >"$PB_WORK/out" 2>&1 ||
    pb_test_fail "expire after the killed one: $(tail -n 1 "$PB_WORK/out")"
pb_assert_eq "$(orphans)" "" "the next expire removed $KILLED"
pb_assert_eq "$(ls "$PB_REPO/backup" | wc -l)" 1 "only the synthetic full is left"

# 3. A backup without a manifest that a committed backup names as its parent lost its
#    manifest to damage, not to a killed writer: kept (with a warning), by every command.
change 2
pb_check "incremental on the synthetic full" pb backup
SYN=$(ls "$PB_REPO/backup" | head -n 1)
mv "$PB_REPO/backup/$SYN/manifest" "$PB_WORK/syn.manifest"
# (a rebase of the broken chain fails after its cleanup; a backup takes a new full)
pb rebase >"$PB_WORK/out" 2>&1
pb backup >>"$PB_WORK/out" 2>&1 || pb_test_fail "backup: $(tail -n 1 "$PB_WORK/out")"
[ "$(grep -c "backup $SYN has no manifest, but backup .* names it as its parent" \
    "$PB_WORK/out")" = 2 ] &&
    pb_test_ok "rebase and backup warn about the parent without a manifest" ||
    pb_test_fail "no warning about $SYN: $(tail -n 2 "$PB_WORK/out")"
pb_assert_eq "$(orphans)" "$SYN" "its objects are kept"
mv "$PB_WORK/syn.manifest" "$PB_REPO/backup/$SYN/manifest"
for id in $(ls "$PB_REPO/backup"); do
    pb_check "backup $id verifies" pb verify --set "$id"
done

# 4. archive-push: a killed push of segment S left S's temp file (its flock died with it);
#    the next push of S removes it, keeps a live writer's temp file of S (flock held) and
#    leaves other segments' alone.
SEGDIR=$PB_WORK/seg && mkdir -p "$SEGDIR"
FIRST=$(ls "$SRC/pg_wal" | grep -E '^[0-9A-F]{24}$' | head -n 1)
# copies of a real segment whose first page claims the place their name gives them
for n in F1 F2; do
    python3 -c 'import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
d[8:16] = struct.pack("<Q", int(sys.argv[3], 16) * len(d))
open(sys.argv[2], "wb").write(d)' "$SRC/pg_wal/$FIRST" "$SEGDIR/0000000100000000000000$n" "$n"
done
_pb_chown_pg "$SEGDIR" && chown postgres "$SEGDIR"/*
push() { _pb_as_pg env PAGEBACK_TEST_FAULT="${2:-}" "$PB_BIN" archive-push "$SEGDIR/$1" \
    --repo "$PB_REPO"; }
push 0000000100000000000000F1 put-new.after-temp-write >/dev/null 2>&1
pb_assert_eq "$?" 137 "archive-push killed at put-new.after-temp-write"
pb_assert_eq "$(temps '*F1.zst' | wc -l)" 1 "the killed push left its temp file"
WAL=$PB_REPO/wal/00000001
DEAD=$(sh -c 'echo $$')
: >"$WAL/0000000100000000000000F1.zst.tmp.$DEAD.0000abcd" # an older killed push
: >"$WAL/0000000100000000000000F2.zst.tmp.$DEAD.0000abcd" # another segment's
LIVE=$WAL/0000000100000000000000F1.zst.tmp.$$.0000beef
: >"$LIVE"
chown postgres "$WAL"/*.tmp.*
# one process that holds the flock (a live writer), so that killing it frees the flock
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close()
time.sleep(30)' "$LIVE" "$PB_WORK/held" &
HOLDER=$!
for i in $(seq 1 100); do [ -e "$PB_WORK/held" ] && break; sleep 0.05; done
push 0000000100000000000000F1 >"$PB_WORK/out" 2>&1 ||
    pb_test_fail "archive-push after the killed ones: $(tail -n 1 "$PB_WORK/out")"
pb_assert_eq "$(temps '*F1.zst')" "${LIVE#"$PB_REPO"/}" \
    "the retry removed the dead pushes' temp files of its segment, kept the live one's"
pb_assert_eq "$(temps '*F2.zst' | wc -l)" 1 "another segment's temp file is not its business"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
push 0000000100000000000000F1 >/dev/null 2>&1 || pb_test_fail "identical push again"
pb_assert_eq "$(temps '*F1.zst')" "" "once its writer is gone, the live one's goes too"
push 0000000100000000000000F2 put-new.after-link >/dev/null 2>&1
pb_assert_eq "$?" 137 "archive-push killed at put-new.after-link"
push 0000000100000000000000F2 >"$PB_WORK/out" 2>&1 ||
    pb_test_fail "archive-push after the kill after the link: $(tail -n 1 "$PB_WORK/out")"
pb_assert_eq "$(temps '*F2.zst')" "" "the retry (segment already there) removed both temp files"
"$PB_BIN" archive-get 0000000100000000000000F2 "$PB_WORK/got" --repo "$PB_REPO" >/dev/null 2>&1 &&
    cmp -s "$PB_WORK/got" "$SEGDIR/0000000100000000000000F2" &&
    pb_test_ok "the segment pushed before the kill is archived byte-exact" ||
    pb_test_fail "segment F2 is not archived byte-exact"

pb_test_summary
