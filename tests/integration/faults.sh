#!/bin/bash
# Bad input fails clearly, with a non-zero exit, naming the thing at fault, and loses
# nothing: corrupt pages in the cluster, corrupt repository objects, a wrong
# repository, an unreachable server, a killed backup.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench "${PB_SCALE:-5}"

# expect_fail MSG PATTERN CMD...: the command must fail and print PATTERN.
expect_fail() {
    local msg=$1 pattern=$2 out rc
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" != 0 ] && echo "$out" | grep -qE "$pattern"; then
        pb_test_ok "$msg (exit $rc)"
    else
        pb_test_fail "$msg: exit $rc, output: $(echo "$out" | tail -n 3)"
    fi
}

pb_check "first full backup" pb backup --type full
GOOD=$(pb_last_id)
REF_DIGEST=$(pg_digest_all "$SRC")

# 1. A page corrupted on disk is reported with its path and block.
pg_psql "$SRC" "CREATE TABLE victim AS SELECT g AS id, repeat('v', 300) AS pad FROM generate_series(1, 2000) g" >/dev/null
REL=$(pg_psql "$SRC" "SELECT pg_relation_filepath('victim')")
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pg_stop "$SRC"
printf 'CORRUPTION' | dd of="$SRC/$REL" bs=1 seek=$((3 * 8192 + 4000)) conv=notrunc status=none
pg_start "$SRC"
OUT=$(pb backup --type full 2>&1)
if echo "$OUT" | grep -q "checksum mismatch in $REL block 3"; then
    pb_test_ok "corrupt page reported as $REL block 3"
else
    pb_test_fail "corrupt page not reported: $(echo "$OUT" | grep -i checksum)"
fi
WARNED=$(pb_last_id)
pb_assert_eq "$(pb_info_field "$WARNED" checksum_errors)" 1 "the backup records one checksum error"
expect_fail "--on-checksum-error=fail refuses the backup" "checksum mismatch in $REL block 3" \
    pb backup --type full --on-checksum-error fail
pb_assert_eq "$(pb_last_id)" "$WARNED" "the refused backup left no visible backup"
pg_psql "$SRC" "DROP TABLE victim" >/dev/null

# 2. An unreachable server: clear error, nothing written.
expect_fail "unreachable PostgreSQL is named" "port 1|connection|connect" \
    env PGPORT=1 "$PB_BIN" backup "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" --dbname "port=1 host=$PGHOST"

# 3. A wrong repository: another cluster's backups are refused.
OTHER=$PB_WORK/other
pg_init_cluster "$OTHER" && pg_start "$OTHER" || pb_die "second cluster did not start"
expect_fail "backup into another cluster's repository is refused" "wrong repository" \
    pb backup --dbname "host=$(pg_sockdir "$OTHER") port=$(pg_port "$OTHER") dbname=postgres"
pg_stop "$OTHER"
expect_fail "a directory that is not a repository is named" "not a pageback repository|no backup|ENOENT|does not exist|not exist" \
    "$PB_BIN" info --repo "$PB_WORK/no-such-repo"

# 4. A killed backup leaves no visible half-backup; the next one succeeds.
BEFORE=$(pb info --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["backups"]))')
pb backup --type full --max-rate 20M >/dev/null 2>&1 &
KPID=$!
sleep 3
pkill -9 -f "pageback backup .*--state-dir $PB_STATE" ; wait $KPID 2>/dev/null  # only our own
AFTER=$(pb info --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["backups"]))')
pb_assert_eq "$AFTER" "$BEFORE" "a killed backup is invisible"
pb_check "the next backup after a kill succeeds" pb backup
NEXT=$(pb_last_id)
pb_check "verify after the kill" pb verify --set "$NEXT"

# 5. Corrupt repository objects: restore and verify fail naming the object; nothing
#    is written for a corrupt manifest.
if [ "$PB_REPO_KIND" = posix ]; then
    PACK=$(ls "$PB_REPO/backup/$GOOD/pack/" | head -n 1)
    cp "$PB_REPO/backup/$GOOD/pack/$PACK" "$PB_WORK/pack.orig"
    SIZE=$(stat -c %s "$PB_REPO/backup/$GOOD/pack/$PACK")
    printf 'XXXXXXXX' | dd of="$PB_REPO/backup/$GOOD/pack/$PACK" bs=1 seek=$((SIZE / 2)) conv=notrunc status=none
    expect_fail "verify names the corrupt pack" "backup/$GOOD/pack/$PACK" pb verify --set "$GOOD"
    mkdir -p "$PB_WORK/rc" && _pb_chown_pg "$PB_WORK/rc"
    expect_fail "restore names the corrupt pack" "backup/$GOOD/pack/$PACK" \
        pb restore --set "$GOOD" --target-dir "$PB_WORK/rc"
    cp "$PB_WORK/pack.orig" "$PB_REPO/backup/$GOOD/pack/$PACK"
    pb_check "verify passes once the pack is repaired" pb verify --set "$GOOD"

    MF=$PB_REPO/backup/$GOOD/manifest
    cp "$MF" "$PB_WORK/manifest.orig"
    printf 'Z' | dd of="$MF" bs=1 seek=100 conv=notrunc status=none
    mkdir -p "$PB_WORK/rm" && _pb_chown_pg "$PB_WORK/rm"
    expect_fail "restore names the corrupt manifest" "backup/$GOOD/manifest" \
        pb restore --set "$GOOD" --target-dir "$PB_WORK/rm"
    pb_assert_eq "$(ls -A "$PB_WORK/rm" | wc -l)" 0 "nothing written for a corrupt manifest"
    cp "$PB_WORK/manifest.orig" "$MF"

    # archive-push of a different segment under an existing name fails loudly.
    SEG=$(ls "$PB_REPO/wal/00000001/" | head -n 1)
    SEG=${SEG%.zst}
    "$PB_BIN" archive-get "$SEG" "$PB_WORK/$SEG" --repo "$PB_REPO" ||
        pb_test_fail "archive-get of $SEG"
    printf 'Z' | dd of="$PB_WORK/$SEG" bs=1 seek=100000 conv=notrunc status=none
    expect_fail "archive-push refuses different content for an archived segment" "$SEG" \
        "$PB_BIN" archive-push "$PB_WORK/$SEG" --repo "$PB_REPO"
    # A segment of another cluster is refused by its system identifier.
    cp "$OTHER/pg_wal/000000010000000000000001" "$PB_WORK/other-seg"
    mkdir -p "$PB_WORK/o" && cp "$PB_WORK/other-seg" "$PB_WORK/o/000000010000000000000001"
    expect_fail "archive-push refuses another cluster's WAL" "wrong repository" \
        "$PB_BIN" archive-push "$PB_WORK/o/000000010000000000000001" --repo "$PB_REPO"
fi

# The good backup still restores to the reference state.
mkdir -p "$PB_WORK/rg" && _pb_chown_pg "$PB_WORK/rg"
if pb_restore_start "$PB_WORK/rg" --set "$GOOD"; then
    pb_assert_eq "$(pg_digest_all "$PB_WORK/rg")" "$REF_DIGEST" "the good backup still restores exactly"
else
    pb_test_fail "restore of the good backup after the faults"
fi
pb_test_summary
