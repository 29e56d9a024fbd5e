#!/bin/bash
# Full speed when nobody else is there (polite I/O): on an idle database the read controller
# probes a second request in flight (one request's latency scatters on a virtual disk; the
# controller's floor and epoch latency are medians, so the scatter no longer forbids the
# probe), and the report JSON says what it did on both axes (depth, request size): the
# floor, the request sizes, the gains measured, the latest decision in words. The backup
# restores byte-exact. On a shared machine others' reads may make the scan yield; then the
# request size must be back at the base size at the yield and the probe is not required.
#
# The cluster lives on a loop device of its own (direct I/O to a file on the machine's
# disk), so the device the scanner watches carries only this backup's reads even on a
# shared machine: the database is idle, as the issue's case is. Without losetup (not
# root), the machine's own disk is used and a yield excuses the probe.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
LOOP=
loop_cleanup() {
    local rc=$?
    if [ -n "$LOOP" ]; then
        [ -f "$SRC/postmaster.pid" ] && _pb_as_pg "$PB_PGBIN/pg_ctl" -D "$SRC" -m immediate -w \
            stop >/dev/null 2>&1
        umount "$PB_WORK/mnt" 2>/dev/null || umount -l "$PB_WORK/mnt" 2>/dev/null
        losetup -d "$LOOP" 2>/dev/null
    fi
    (exit $rc)
}
trap '_pb_rc=$?; (exit $_pb_rc); loop_cleanup; _pb_s3_cleanup; (exit $_pb_rc); _pb_cleanup' EXIT
SRC=$PB_WORK/src
if [ "$(id -u)" = 0 ] && truncate -s 600M "$PB_WORK/disk.img" &&
    LOOP=$(losetup -f --show --direct-io=on "$PB_WORK/disk.img" 2>/dev/null) &&
    mkfs.ext4 -q -F "$LOOP" && mkdir -p "$PB_WORK/mnt" && mount "$LOOP" "$PB_WORK/mnt"; then
    _pb_chown_pg "$PB_WORK/mnt"
    SRC=$PB_WORK/mnt/src
    echo "cluster on $LOOP (a loop device of its own, direct I/O)"
else
    echo "no loop device: the cluster shares the machine's disk"
fi
pg_init_cluster "$SRC" && pg_start "$SRC" || pb_die "source cluster did not start"
pg_env "$SRC"
pgbench_init "$SRC" "${PB_SCALE:-5}" || pb_die "pgbench init failed"
OUT=$PB_WORK/out
mkdir -p "$OUT" && _pb_chown_pg "$OUT"
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$@"; }

pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb backup --type full --report "$OUT/full.json" >"$PB_WORK/full.log" 2>&1
pb_assert_eq "$?" 0 "the full backup succeeds"
ID=$(pb_last_id)
DIGEST=$(pg_digest_all "$SRC")
io() { json "$OUT/full.json" "[\"adaptive_io\"][\"$1\"]" 2>/dev/null || echo missing; }
for k in latency_floor_median_ms size_grows size_plateaus request_bytes_peak \
    request_bytes_final depth_gain_pct size_gain_pct decision; do
    [ "$(io "$k")" != missing ] && pb_test_ok "the report's adaptive_io has $k" ||
        pb_test_fail "the report's adaptive_io has no $k"
done
RS=$(json "$OUT/full.json" '["io_applied"]["read_size"]' 2>/dev/null || echo 0)
PEAK=$(io request_bytes_peak)
FINAL=$(io request_bytes_final)
case "$PEAK" in
missing) pb_test_fail "no request size in the report" ;;
*) [ "$PEAK" -ge "$RS" ] && [ "$PEAK" -le $((2 * 1024 * 1024 > RS ? 2 * 1024 * 1024 : RS)) ] &&
       pb_test_ok "requests of $((PEAK / 1024)) KiB at most (base $((RS / 1024)) KiB, within 2 MiB)" ||
       pb_test_fail "request size peak $PEAK outside [$RS, 2 MiB]" ;;
esac
YIELDS=$(io yields)
GROWS=$(io grows)
FLOOR=$(io latency_floor_median_ms)
echo "controller: grows $GROWS plateaus $(io plateaus) cuts $(io cuts) yields $YIELDS," \
    "size grows $(io size_grows) plateaus $(io size_plateaus), requests $PEAK/$FINAL," \
    "floor median $FLOOR ms (lowest $(io latency_floor_ms) ms): $(io decision)"
if [ "$YIELDS" = 0 ]; then
    [ "$GROWS" != missing ] && [ "$GROWS" -ge 1 ] &&
        pb_test_ok "idle device: a second request was probed ($GROWS grows)" ||
        pb_test_fail "idle device, and no second request was ever probed (grows $GROWS)"
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$FLOOR" 2>/dev/null &&
        pb_test_ok "the floor is an epoch's median ($FLOOR ms)" ||
        pb_test_fail "no median floor ($FLOOR)"
else
    pb_test_ok "others read the device meanwhile ($YIELDS yields): the probe is not required"
fi
grep -Eq "I/O sizes: floor [0-9.]+ ms \(median of an epoch at 1 in flight\), requests [0-9]+ KiB" \
    "$PB_WORK/full.log" && pb_test_ok "the log states the request sizes and the floor" ||
    pb_test_fail "no 'I/O sizes:' line in the log"
pb_check "restore starts" pb_restore_start "$PB_WORK/r1" --set "$ID"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r1")" "$DIGEST" "restored digests equal the source"
pg_stop "$PB_WORK/r1"
pb_test_summary
