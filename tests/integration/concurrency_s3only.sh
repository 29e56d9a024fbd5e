#!/bin/bash
# One writer per S3 repository and no leftovers of gone writers (run with
# PB_REPO_KIND=s3): two backups started together from two state directories (one
# spelling the repository with a trailing slash) give one success and one failure
# naming the lock holder; a backup killed with SIGKILL leaves its lock object, which
# the next backup takes over (the holder's pid is gone); that backup aborts the dead
# writer's multipart uploads under backup/ and removes its objects without a manifest,
# but leaves a fresh WAL upload (archive-push runs without the lock) alone.
source "$(dirname "$0")/pb_lib.sh"
[ "$PB_REPO_KIND" = s3 ] || { echo "0 passed, 0 failed"; exit 0; }
pb_setup
set -a
# shellcheck disable=SC1091
source "$PB_S3_DIR/env"
set +a
pb_source_pgbench "${PB_SCALE:-2}"
BUCKET=${PB_REPO#s3://}
BUCKET=${BUCKET%%/*}
S3TOOL=(/usr/bin/python3 "$PB_SRCDIR/tests/s3server/s3tool.py" request)

# pbx STATE REPO CMD ARGS...: pageback as postgres with its own state dir and --repo.
pbx() {
    local state=$1 repo=$2 cmd=$3
    shift 3
    _pb_as_pg env PGHOST="$PGHOST" PGPORT="$PGPORT" PGUSER=postgres PGDATABASE=postgres \
        "$PB_BIN" "$cmd" --repo "$repo" --s3-endpoint "$S3_ENDPOINT" --config "$PB_S3_CONFIG" \
        --state-dir "$state" "$@"
}
new_state() {
    mkdir -p "$PB_WORK/$1" && chmod 0700 "$PB_WORK/$1" && _pb_chown_pg "$PB_WORK/$1"
    echo "$PB_WORK/$1"
}
# uploads PREFIX: unfinished multipart uploads whose key starts with PREFIX.
uploads() {
    "${S3TOOL[@]}" GET "$S3_ENDPOINT/$BUCKET?uploads=" | grep -o "<Key>$1[^<]*</Key>" | wc -l
}
# keys PREFIX: object keys under PREFIX.
keys() {
    "${S3TOOL[@]}" GET "$S3_ENDPOINT/$BUCKET?prefix=$1" | grep -o "<Key>[^<]*</Key>" |
        sed 's/<Key>//; s/<\/Key>//'
}
S1=$(new_state s1)
S2=$(new_state s2)

pb_check "first full backup" pbx "$S1" "$PB_REPO" backup --type full
( pbx "$S1" "$PB_REPO" backup --type full --max-rate 8M >"$PB_WORK/b1.out" 2>&1
  echo $? >"$PB_WORK/b1.rc" ) &
B1=$!
( pbx "$S2" "$PB_REPO/" backup --type full --max-rate 8M >"$PB_WORK/b2.out" 2>&1
  echo $? >"$PB_WORK/b2.rc" ) &
B2=$!
wait $B1 $B2
RC1=$(cat "$PB_WORK/b1.rc")
RC2=$(cat "$PB_WORK/b2.rc")
if { [ "$RC1" = 0 ] && [ "$RC2" != 0 ]; } || { [ "$RC1" != 0 ] && [ "$RC2" = 0 ]; }; then
    pb_test_ok "exactly one of two simultaneous S3 backups succeeds (exit $RC1 / $RC2)"
else
    pb_test_fail "two simultaneous S3 backups: exits $RC1 and $RC2"
fi
LOSER=1
[ "$RC1" = 0 ] && LOSER=2
if grep -qE "locked by another writer: backup by user postgres, pid [0-9]+ on host" \
    "$PB_WORK/b$LOSER.out"; then
    pb_test_ok "the second S3 writer names the lock holder"
else
    pb_test_fail "the second S3 writer's message: $(tail -n 2 "$PB_WORK/b$LOSER.out")"
fi
pb_check "the S3 repository verifies after the race" pbx "$S1" "$PB_REPO" verify

# A dead writer's debris, and a live archive-push's upload.
REPO_PREFIX=${PB_REPO#s3://$BUCKET/}
ORPHAN=20200101-000000F-000000-0000
"${S3TOOL[@]}" POST "$S3_ENDPOINT/$BUCKET/$REPO_PREFIX/backup/$ORPHAN/pack/000002?uploads=" >/dev/null
"${S3TOOL[@]}" PUT "$S3_ENDPOINT/$BUCKET/$REPO_PREFIX/backup/$ORPHAN/pack/000001" >/dev/null
"${S3TOOL[@]}" POST "$S3_ENDPOINT/$BUCKET/$REPO_PREFIX/wal/00000009/000000090000000000000001.zst?uploads=" >/dev/null

S3S=$(new_state s3)
pbx "$S3S" "$PB_REPO" backup --type full --max-rate 4M >"$PB_WORK/k.out" 2>&1 &
KWRAP=$!
COMM=$(basename "$PB_BIN" | cut -c1-15)
KPID=
for _ in $(seq 1 100); do
    KPID=$(pgrep -f -- "--state-dir $S3S" |
        while read -r p; do [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$COMM" ] && echo "$p"; done |
        head -n 1)
    [ -n "$KPID" ] && grep -q "started at LSN" "$PB_WORK/k.out" && break
    sleep 0.1
done
sleep 1
[ -n "$KPID" ] && kill -9 "$KPID"
wait $KWRAP 2>/dev/null
pb_assert_eq "$(keys "$REPO_PREFIX/lock/" | wc -l)" 1 "the killed backup (pid ${KPID:-?}) left its lock object"
pb_check "a backup after the kill takes the lock over and succeeds" pbx "$S1" "$PB_REPO" backup
pb_assert_eq "$(uploads "$REPO_PREFIX/backup/")" 0 "the dead writers' uploads under backup/ are aborted"
pb_assert_eq "$(uploads "$REPO_PREFIX/wal/")" 1 "a fresh WAL upload (archive-push, no lock) is kept"
pb_assert_eq "$(keys "$REPO_PREFIX/backup/" | awk -F/ '{print $3}' | sort -u | while read -r id; do
    keys "$REPO_PREFIX/backup/$id/manifest" | grep -q . || echo "$id"; done)" "" \
    "no backup without a manifest is left"
pb_assert_eq "$(keys "$REPO_PREFIX/lock/" | wc -l)" 0 "no lock object is left"
pb_check "the S3 repository verifies after the kill" pbx "$S1" "$PB_REPO" verify
pb_test_summary
