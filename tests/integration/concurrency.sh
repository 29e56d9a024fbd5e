#!/bin/bash
# One writer per repository, safe modes, no leftovers, one winner per WAL name:
#  1. two backups of one repository started at the same moment from two state
#     directories (one spelling the repository with a trailing slash): exactly one
#     succeeds, the other fails at once naming the lock holder; the repository verifies;
#  2. a backup under umask 000: every object 0640 at most, every directory 0750 at most;
#  3. a backup killed with SIGKILL mid-run, then another: the dead writer's temp files,
#     objects without a manifest and lock are gone; the repository verifies;
#  4. two archive-push of one segment name with different content, started together
#     (several rounds): one wins, the other fails naming the segment, and the archive
#     holds the winner's bytes.
# Posix repository only (modes, paths); the S3 lock and create-if-absent are covered
# by tests/unit/engine/storage/s3_test.c.
source "$(dirname "$0")/pb_lib.sh"
[ "$PB_REPO_KIND" = posix ] || { echo "concurrency.sh: posix repository only"; exit 0; }
pb_setup
pb_source_pgbench "${PB_SCALE:-2}"

# pbx STATE REPO CMD ARGS...: pageback as postgres with its own state dir and --repo.
pbx() {
    local state=$1 repo=$2 cmd=$3
    shift 3
    _pb_as_pg env PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres PGDATABASE=postgres \
        "$PB_BIN" "$cmd" --repo "$repo" --state-dir "$state" "$@"
}
new_state() {
    mkdir -p "$PB_WORK/$1" && chmod 0700 "$PB_WORK/$1" && _pb_chown_pg "$PB_WORK/$1"
    echo "$PB_WORK/$1"
}
S1=$(new_state s1)
S2=$(new_state s2)

# ---- 1. two backups at once, two state dirs, /repo and /repo/ --------------------
pb_check "first full backup" pbx "$S1" "$PB_REPO" backup --type full
# --max-rate keeps the winner busy for seconds, so the two surely overlap.
( start=$(date +%s.%N); pbx "$S1" "$PB_REPO" backup --type full --max-rate 8M \
    >"$PB_WORK/b1.out" 2>&1; echo "$? $start $(date +%s.%N)" >"$PB_WORK/b1.rc" ) &
B1=$!
( start=$(date +%s.%N); pbx "$S2" "$PB_REPO/" backup --type full --max-rate 8M \
    >"$PB_WORK/b2.out" 2>&1; echo "$? $start $(date +%s.%N)" >"$PB_WORK/b2.rc" ) &
B2=$!
wait $B1 $B2
read -r RC1 T1A T1B <"$PB_WORK/b1.rc"
read -r RC2 T2A T2B <"$PB_WORK/b2.rc"
if { [ "$RC1" = 0 ] && [ "$RC2" != 0 ]; } || { [ "$RC1" != 0 ] && [ "$RC2" = 0 ]; }; then
    pb_test_ok "exactly one of two simultaneous backups succeeds (exit $RC1 / $RC2)"
else
    pb_test_fail "two simultaneous backups: exits $RC1 and $RC2 (want one 0, one non-zero)"
fi
if [ "$RC1" != 0 ]; then LOSER=1 LT=$(awk "BEGIN{print $T1B - $T1A}"); else LOSER=2 LT=$(awk "BEGIN{print $T2B - $T2A}"); fi
if grep -qE "locked by another writer: backup by user postgres, pid [0-9]+ on host" \
    "$PB_WORK/b$LOSER.out"; then
    pb_test_ok "the second writer names the lock holder: $(grep -o 'locked by.*since' "$PB_WORK/b$LOSER.out")"
else
    pb_test_fail "the second writer's message: $(tail -n 2 "$PB_WORK/b$LOSER.out")"
fi
if awk "BEGIN{exit !($LT < 5)}"; then
    pb_test_ok "the second writer fails at once (${LT} s)"
else
    pb_test_fail "the second writer took ${LT} s to fail"
fi
pb_check "the repository verifies after the race" pbx "$S1" "$PB_REPO" verify
pb_assert_eq "$(find "$PB_REPO" -name '*.tmp.*' | wc -l)" 0 "no temp files after the race"
pb_assert_eq "$(pbx "$S1" "$PB_REPO" info --json | /usr/bin/python3 -c '
import json, sys; print(len(json.load(sys.stdin)["backups"]))')" 2 "two backups listed"

# ---- 1b. the state directory ----------------------------------------------------------
S4=$(new_state s4)
chmod 0777 "$S4"
OUT=$(pbx "$S4" "$PB_REPO" backup 2>&1)
if [ $? != 0 ] && echo "$OUT" | grep -q "state directory $S4 is writable by group or others"; then
    pb_test_ok "a world-writable state directory is refused"
else
    pb_test_fail "world-writable state directory: $(echo "$OUT" | tail -n 1)"
fi
# The default state directory: under XDG_STATE_HOME, one for "/repo" and "/repo/".
XDG=$PB_WORK/xdg
mkdir -p "$XDG" && chmod 0700 "$XDG" && _pb_chown_pg "$XDG"
for spelling in "$PB_REPO" "$PB_REPO/"; do
    _pb_as_pg env -u PAGEBACK_STATE_DIR XDG_STATE_HOME="$XDG" PGHOST="$PGHOST" PGPORT="$PGPORT"         PGUSER=postgres PGDATABASE=postgres "$PB_BIN" backup --repo "$spelling"         >"$PB_WORK/xdg.out" 2>&1 || pb_test_fail "backup with the default state dir: $(tail -n 1 "$PB_WORK/xdg.out")"
done
pb_assert_eq "$(ls "$XDG/pageback" 2>/dev/null | wc -l)" 1     "default state directory: one under \$XDG_STATE_HOME for /repo and /repo/"

# ---- 2. umask 000 -----------------------------------------------------------------
_pb_as_pg env PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres PGDATABASE=postgres \
    sh -c 'umask 000; exec "$0" backup --repo "$1" --state-dir "$2"' \
    "$PB_BIN" "$PB_REPO" "$S1" >"$PB_WORK/um.out" 2>&1 ||
    pb_test_fail "backup under umask 000: $(tail -n 2 "$PB_WORK/um.out")"
UID_ID=$(pb_last_id)
WIDE_F=$(find "$PB_REPO" -type f -perm /0137 | head -n 3)
WIDE_D=$(find "$PB_REPO" -mindepth 1 -type d -perm /0027 | head -n 3)
pb_assert_eq "$WIDE_F" "" "umask 000: no object wider than 0640"
pb_assert_eq "$WIDE_D" "" "umask 000: no directory wider than 0750"
pb_assert_eq "$(find "$PB_REPO/backup/$UID_ID" -type f ! -perm 0640 | wc -l)" 0 \
    "umask 000: the backup's objects are 0640"
pb_assert_eq "$(find "$PB_REPO/backup/$UID_ID" -type d ! -perm 0750 | wc -l)" 0 \
    "umask 000: the backup's directories are 0750"
pb_log "objects checked: $(find "$PB_REPO" -type f | wc -l), directories: $(find "$PB_REPO" -type d | wc -l)"

# ---- 3. kill -9 mid-run, then another backup -----------------------------------------
S3=$(new_state s3)
pbx "$S3" "$PB_REPO" backup --type full --max-rate 4M >"$PB_WORK/k.out" 2>&1 &
KWRAP=$!
KPID=
COMM=$(basename "$PB_BIN" | cut -c1-15) # the kernel's comm: at most 15 characters
for _ in $(seq 1 100); do
    KPID=$(pgrep -f -- "backup --repo $PB_REPO --state-dir $S3" | grep -vx "$KWRAP" |
        while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$COMM" ] && echo "$p"; done |
        head -n 1)
    [ -n "$KPID" ] && [ -n "$(find "$PB_REPO/backup" -name '*.tmp.*' 2>/dev/null)" ] && break
    sleep 0.1
done
sleep 1
[ -n "$KPID" ] && kill -9 "$KPID"
wait $KWRAP 2>/dev/null
# A dead writer's committed object without a manifest, as a kill after a pack's commit
# leaves it.
ORPHAN=20200101-000000F-000000-0000
mkdir -p "$PB_REPO/backup/$ORPHAN/pack" && echo partial >"$PB_REPO/backup/$ORPHAN/pack/000001"
_pb_chown_pg "$PB_REPO/backup/$ORPHAN"
TMPS=$(find "$PB_REPO/backup" -name '*.tmp.*' | wc -l)
if [ -n "$KPID" ] && [ "$TMPS" -gt 0 ] && [ -e "$PB_REPO/lock/writer" ]; then
    pb_test_ok "the killed backup (pid $KPID) left $TMPS temp files and its lock"
else
    pb_test_fail "kill mid-run: pid '${KPID}', $TMPS temp files, lock $(ls "$PB_REPO/lock" 2>&1)"
fi
pb_check "a backup after the kill succeeds" pbx "$S1" "$PB_REPO" backup
# Only the dead writer's (<name>.tmp.<pid>.<random>): PostgreSQL's archiver may be
# pushing a segment right now, and its temp file is a live writer's.
pb_assert_eq "$(find "$PB_REPO" -name "*.tmp.$KPID.*" | wc -l)" 0 "the dead writer's temp files are gone"
pb_assert_eq "$(ls "$PB_REPO/backup" | while read -r id; do
    [ -e "$PB_REPO/backup/$id/manifest" ] || echo "$id"; done)" "" \
    "no backup directory without a manifest is left"
pb_assert_eq "$(ls -A "$PB_REPO/lock" 2>/dev/null)" "" "no lock is left"
pb_check "the repository verifies after the kill" pbx "$S1" "$PB_REPO" verify
# A manifest lost to damage is not a dead writer's leftover: a backup that names it as
# its parent keeps its objects for a repair.
LOST=$(pb_last_id)
pbx "$S1" "$PB_REPO" backup >/dev/null 2>&1 || pb_test_fail "backup on top of $LOST"
mv "$PB_REPO/backup/$LOST/manifest" "$PB_WORK/lost-manifest"
pbx "$S1" "$PB_REPO" backup --type full >"$PB_WORK/lost.out" 2>&1 || pb_test_fail "full backup with $LOST damaged"
pb_assert_eq "$(find "$PB_REPO/backup/$LOST" -type f | wc -l | awk '{print ($1 > 0)}')" 1 \
    "the objects of a backup whose manifest was lost (its child needs it) are kept"
mv "$PB_WORK/lost-manifest" "$PB_REPO/backup/$LOST/manifest"
pb_check "the repository verifies once the manifest is back" pbx "$S1" "$PB_REPO" verify

# ---- 4. concurrent archive-push of one name, different content ------------------------
SEG0=$(ls "$SRC/pg_wal" | grep -E '^[0-9A-F]{24}$' | head -n 1)
WINS=0 BAD=0
for round in 1 2 3 4 5 6; do
    # a later timeline, same segment number: archive-get checks the page address
    NAME=$(printf '%08X%s' "$((8 + round))" "${SEG0:8}")
    mkdir -p "$PB_WORK/pa$round/a" "$PB_WORK/pa$round/b"
    cp "$SRC/pg_wal/$SEG0" "$PB_WORK/pa$round/a/$NAME"
    cp "$SRC/pg_wal/$SEG0" "$PB_WORK/pa$round/b/$NAME"
    printf 'B%05d' "$round" | dd of="$PB_WORK/pa$round/b/$NAME" bs=1 seek=200000 conv=notrunc status=none
    "$PB_BIN" archive-push "$PB_WORK/pa$round/a/$NAME" --repo "$PB_REPO" >"$PB_WORK/pa$round/a.out" 2>&1 &
    PA=$!
    "$PB_BIN" archive-push "$PB_WORK/pa$round/b/$NAME" --repo "$PB_REPO" >"$PB_WORK/pa$round/b.out" 2>&1 &
    PBB=$!
    wait $PA; RA=$?
    wait $PBB; RB=$?
    "$PB_BIN" archive-get "$NAME" "$PB_WORK/pa$round/stored" --repo "$PB_REPO" >/dev/null 2>&1
    if [ "$RA" = 0 ] && [ "$RB" != 0 ]; then W=a L=b
    elif [ "$RA" != 0 ] && [ "$RB" = 0 ]; then W=b L=a
    else W= L=
    fi
    if [ -n "$W" ] && cmp -s "$PB_WORK/pa$round/stored" "$PB_WORK/pa$round/$W/$NAME" &&
        grep -q "WAL file $NAME is already archived .* with DIFFERENT content" "$PB_WORK/pa$round/$L.out"; then
        WINS=$((WINS + 1))
    else
        BAD=$((BAD + 1))
        pb_log "round $round: exits $RA/$RB; a: $(tail -n 1 "$PB_WORK/pa$round/a.out"); b: $(tail -n 1 "$PB_WORK/pa$round/b.out")"
    fi
done
pb_assert_eq "$BAD" 0 "concurrent archive-push: one winner, one loud loser, winner's bytes stored ($WINS rounds)"
pb_test_summary
