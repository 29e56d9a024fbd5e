#!/bin/bash
# Inputs: a --read-size that is not whole 8 kB pages is refused
# before anything is read; only this cluster's PG_<major>_<catversion> directory of a
# tablespace is backed up (another cluster's directory in the same location is not),
# and the restore of what is backed up equals the source.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench 1

# 1. --read-size: 12 KiB is a multiple of 4 KiB but splits every other page.
# 18014398509482984K is 2^64 + 1 MiB: it must not wrap to a valid 1 MiB.
for rs in 12k 132k 4k 1000 18014398509482984K; do
    out=$(pb backup --type full --read-size "$rs" 2>&1)
    rc=$?
    if [ $rc != 0 ] && echo "$out" | grep -q "multiple of 8 KiB"; then
        pb_test_ok "--read-size $rs is refused clearly (exit $rc)"
    else
        pb_test_fail "--read-size $rs: exit $rc: $(echo "$out" | tail -n 1)"
    fi
done
pb_assert_eq "$(ls "$PB_REPO/backup" 2>/dev/null | wc -l)" 0 "the refused backups left nothing"

# 2. A tablespace whose location another (older) cluster also uses.
TS=$PB_WORK/ts1
mkdir -p "$TS" && _pb_chown_pg "$TS"
pg_psql "$SRC" "CREATE TABLESPACE ts1 LOCATION '$TS'" >/dev/null
pg_psql "$SRC" "CREATE TABLE in_ts TABLESPACE ts1 AS SELECT g, md5(g::text) v FROM generate_series(1, 5000) g" >/dev/null
OURS=$(ls "$TS")
FOREIGN=PG_16_202307071
mkdir -p "$TS/$FOREIGN/5" && head -c 16384 /dev/urandom >"$TS/$FOREIGN/5/16600"
_pb_chown_pg "$TS/$FOREIGN"
pb_log "tablespace holds $OURS (ours) and $FOREIGN (another cluster's)"
pb_check "full backup with 1 MiB reads" pb backup --type full --read-size 1M
ID=$(pb_last_id)
DIGEST=$(pg_digest_all "$SRC")
TSOID=$(pg_psql "$SRC" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")
RTS=$PB_WORK/r1-ts1
mkdir -p "$RTS" && _pb_chown_pg "$RTS"
pb_check "restore starts" pb_restore_start "$PB_WORK/r1" --set "$ID" --tablespace-map "$TSOID=$RTS"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r1")" "$DIGEST" "restored digests equal the source"
pb_assert_eq "$(ls "$RTS" | tr '\n' ' ')" "$OURS " "the restored tablespace holds only $OURS"
pg_stop "$PB_WORK/r1"
pb_test_summary
