#!/bin/bash
# Manifest format version 2 (docs/MANIFEST.md): backups write version 2
# manifests (prefix "PBMANIF1", version 2, chunks of records, header and index first);
# restore and verify read them; info and expire read the header alone, so a manifest
# whose file records are damaged still lists with its header, while restore and verify
# refuse it naming the object. With PB_OLD_BIN (a binary from before version 2), the
# full is taken by it (a version 1 manifest in the compressed envelope) and the new
# binary's incremental, restore and verify must read across both versions.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 1
q() { pg_psql "$SRC" "$1"; }
sum() { pg_psql "$1" "SELECT sum(abalance) || '/' || count(*) FROM pgbench_accounts"; }
head_of() { od -An -c -N 8 "$1" | tr -d ' \n'; }       # the magic
version_of() { od -An -tu4 -j 8 -N 4 "$1" | tr -d ' '; } # the u32 after it

NEW_BIN=$PB_BIN
if [ -n "${PB_OLD_BIN:-}" ] && [ -x "$PB_OLD_BIN" ]; then
    PB_BIN=$PB_OLD_BIN
    pb_check "full backup by the binary before version 2" pb backup --type full >/dev/null
    PB_BIN=$NEW_BIN
    F=$(pb_last_id)
    pb_assert_eq "$(head_of "$PB_REPO/backup/$F/manifest")" PBZOBJ01 \
        "the old binary's manifest is version 1 in the compressed envelope"
else
    pb_log "PB_OLD_BIN not set: the full is taken by $PB_BIN (no mixed-version chain)"
    pb_check "full backup" pb backup --type full >/dev/null
    F=$(pb_last_id)
fi
q "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid % 50 = 0" >/dev/null
q "CHECKPOINT" >/dev/null
pb_check "incremental backup" pb backup >/dev/null
I=$(pb_last_id)
WANT=$(sum "$SRC")
M=$PB_REPO/backup/$I/manifest
pb_assert_eq "$(head_of "$M")" PBMANIF1 "the incremental's manifest starts with PBMANIF1"
pb_assert_eq "$(version_of "$M")" 2 "the incremental's manifest is format version 2"

D=$PB_WORK/r1
if pb_restore_start "$D" --set "$I"; then
    pb_assert_eq "$(sum "$D")" "$WANT" "restore of the chain ($F, $I) holds the source's rows"
    pg_stop "$D"
else
    pb_test_fail "restore of $I or its recovery failed"
fi
rm -rf "$D"
pb_check "verify reads the chain" pb verify >/dev/null 2>&1
pb_assert_eq "$(pb info --json | python3 -c "
import json, sys
print(len(json.load(sys.stdin)['backups']))")" 2 "info lists both backups"

# Damage inside the file records (the last chunk): the header still reads.
cp "$M" "$PB_WORK/manifest.good"
size=$(stat -c %s "$M")
printf '\x55' | dd of="$M" bs=1 seek=$((size - 3)) conv=notrunc status=none
pb_assert_eq "$(pb info --json 2>/dev/null | python3 -c "
import json, sys
print(' '.join(b['id'] for b in json.load(sys.stdin)['backups']))" 2>/dev/null)" "$F $I" \
    "info lists a backup whose file records are damaged (header read alone)"
out=$(pb restore --target-dir "$PB_WORK/r2" --set "$I" 2>&1)
rc=$?
[ $rc != 0 ] && grep -q "backup/$I/manifest" <<<"$out" &&
    pb_test_ok "restore refuses the damaged manifest, naming it" ||
    pb_test_fail "restore of a damaged manifest: rc $rc: $out"
out=$(pb verify 2>&1)
rc=$?
[ $rc != 0 ] && grep -q "backup/$I/manifest" <<<"$out" &&
    pb_test_ok "verify reports the damaged manifest, naming it" ||
    pb_test_fail "verify of a damaged manifest: rc $rc: $out"
cp "$PB_WORK/manifest.good" "$M"
pb_check "verify passes once the manifest is whole again" pb verify >/dev/null 2>&1
pb_test_summary
