#!/bin/bash
# verify with no --set checks the whole repository (trust issue, defect 8): every backup
# (not only the newest chain) and the whole WAL archive. Two independent chains (full +
# incremental each) with WAL between them; an undamaged repository verifies; a damaged
# frame of the OLDER full's pack is found and named although the newest chain does not
# need it; a WAL segment deleted in the middle of the archive (inside no backup's
# window) is named as a gap; a damaged segment and a damaged older manifest are named;
# each repaired repository verifies again.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 1
q() { pg_psql "$SRC" "$1"; }
change() { q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = $1" >/dev/null; }
# switch_n N: N segments of WAL, each with a little change, all archived.
switch_n() {
    local i seg last
    for i in $(seq 1 "$1"); do
        change "$i"
        seg=$(q "SELECT pg_walfile_name(pg_switch_wal())")
    done
    for i in $(seq 1 300); do
        last=$(q "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        [[ "$last" < "$seg" ]] || return 0
        sleep 0.1
    done
    return 1
}
# verify_fails LABEL PATTERN [VERIFY_ARGS...]: verify exits non-zero naming PATTERN.
verify_fails() {
    local label=$1 pattern=$2 out rc
    shift 2
    out=$(pb verify "$@" 2>&1)
    rc=$?
    if [ "$rc" != 0 ] && grep -qE -- "$pattern" <<<"$out"; then
        pb_test_ok "$label (exit $rc)"
    else
        pb_test_fail "$label: exit $rc, output: $(tail -n 4 <<<"$out")"
    fi
}
verify_passes() {
    local out
    if out=$(pb verify "$@" 2>&1); then
        pb_test_ok "$1"
    else
        pb_test_fail "$1: $(tail -n 4 <<<"$out")"
    fi
}

pb_backup_id F1 --type full
# One row, so I1 re-ships one page and still needs almost every frame of F1's pack (the
# damaged frame below is in the middle of it); a change spread over every page would let
# I1 ship its own copy of that frame, and the check that I1 fails too would depend on
# where the damage falls.
q "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1" >/dev/null
pb_backup_id I1
switch_n 4 || pb_die "WAL between the chains was not archived"
pb_backup_id F2 --type full
change 7
pb_backup_id I2
switch_n 1 || pb_die "WAL after the last backup was not archived"
pb_log "chains: $F1 <- $I1, then $F2 <- $I2"

out=$(pb verify 2>&1)
rc=$?
pb_assert_eq "$rc" 0 "an undamaged repository verifies (no --set)"
pb_check "verify reports every backup" test "$(grep -cE "^backup ($F1|$I1|$F2|$I2) .*: ok" <<<"$out")" = 4
pb_check "verify reports the WAL archive" grep -q "^WAL archive: ok" <<<"$out"

# 1. A damaged frame of the older full's pack.
if [ "$PB_REPO_KIND" = posix ]; then
    PACK=$PB_REPO/backup/$F1/pack/$(ls "$PB_REPO/backup/$F1/pack/" | head -n 1)
    cp "$PACK" "$PB_WORK/pack.orig"
    SIZE=$(stat -c %s "$PACK")
    printf 'XXXXXXXX' | dd of="$PACK" bs=1 seek=$((SIZE / 2)) conv=notrunc status=none
    verify_passes "verify --set latest does not need the older full" --set latest
    verify_fails "verify names the damaged pack of the older full" \
        "problem in $F1: .*backup/$F1/pack/"
    verify_fails "verify names the incremental built on it too" "backup $I1 .*FAILED|problem in $I1"
    cp "$PB_WORK/pack.orig" "$PACK"
    verify_passes "verify passes once the pack is repaired"

    # 2. A WAL segment in the middle of the archive, inside no backup's window.
    STOP1=$(pb_info_field "$I1" stop_wal)
    GAP=$(printf '%s%08X' "${STOP1:0:16}" $((16#${STOP1:16:8} + 2)))
    OBJ=$PB_REPO/wal/${GAP:0:8}/$GAP.zst
    mv "$OBJ" "$PB_WORK/gap.zst" || pb_die "no archived segment $GAP"
    verify_passes "verify --set latest does not need $GAP" --set latest
    verify_fails "verify names the gap at $GAP" "gap in the WAL archive on timeline 1: $GAP"
    mv "$PB_WORK/gap.zst" "$OBJ"

    # 3. A damaged WAL segment: its checksum.
    cp "$OBJ" "$PB_WORK/seg.orig"
    printf 'ZZZZ' | dd of="$OBJ" bs=1 seek=64 conv=notrunc status=none
    verify_fails "verify names the damaged WAL segment" "WAL file $GAP"
    cp "$PB_WORK/seg.orig" "$OBJ"

    # 4. A damaged manifest of the older chain.
    MF=$PB_REPO/backup/$I1/manifest
    cp "$MF" "$PB_WORK/manifest.orig"
    printf 'Z' | dd of="$MF" bs=1 seek=100 conv=notrunc status=none
    verify_fails "verify names the damaged manifest" "problem in $I1: .*backup/$I1/manifest"
    cp "$PB_WORK/manifest.orig" "$MF"
    verify_passes "the repaired repository verifies"
fi
pb_test_summary
