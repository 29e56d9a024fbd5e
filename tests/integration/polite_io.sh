#!/bin/bash
# Polite I/O: the backup's log states the read controller's decisions, the I/O
# class and CPU priority applied (checked on the running process too, its reading thread
# included), --checkpoint reaches PostgreSQL, pinned options are honoured, --max-memory too
# small is refused,
# and the backups restore byte-exact.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench "${PB_SCALE:-5}"
PGLOG=$(pg_logfile "$SRC")

# The checkpoint lines PostgreSQL logged since line $1 of its log.
ckpt_since() { tail -n +"$1" "$PGLOG" | grep -E "checkpoint starting:" || true; }

# 1. Defaults: adaptive reads, idle I/O class, SCHED_IDLE workers, spread checkpoint.
pg_psql "$SRC" "CHECKPOINT" >/dev/null
N0=$(wc -l <"$PGLOG")
B1=$PB_WORK/b1.log
pb_check "full backup with the polite defaults" pb_backup_to "$B1" --type full
ID1=$(pb_last_id)
DIGEST1=$(pg_digest_all "$SRC")
pb_log_has "$B1" "I/O class: (idle|best-effort 7 \(idle refused).*; (scheduler|the device)" \
    "the log says which I/O class was applied and what the scheduler does with it"
pb_log_has "$B1" "CPU priority: workers (SCHED_IDLE|nice 19)" "the log says the workers' CPU priority"
pb_log_has "$B1" "reading [0-9]+ KiB requests, adaptive: 1 in flight to start, at most [0-9]+" \
    "the reads start adaptive at one in flight"
pb_log_has "$B1" "I/O: adaptive, 1\.\.[0-9]+ in flight \(peak [0-9]+, final [0-9]+\): [0-9]+ grows" \
    "the log counts the controller's decisions"
if grep -Eq "scan: ([0-9]+ in flight: |yielding: [0-9]+ foreground reads/s|resuming: )" "$B1"; then
    pb_test_ok "the controller's decisions are stated in words: $(grep -m1 'scan: ' "$B1" |
        sed 's/.*scan: //')"
else
    # A tiny cluster can be read before one decision is due (0.05 s, 8 completions).
    grep -Eq "requests, adaptive" "$B1" && pb_test_ok "no decision was due (scan too short)" ||
        pb_test_fail "no controller decision in $B1"
fi
pb_log_has "$B1" "checkpoint \(spread\) took [0-9.]+ s" "the log reports the spread checkpoint's wait"
pb_log_has "$B1" "repository: [0-9]+ flushes for [0-9.]+ MiB written \([0-9.]+ per GB\); peak RSS" \
    "the log reports flushes per GB and peak RSS"
C1=$(ckpt_since "$N0")
case "$C1" in
*"immediate"*) pb_test_fail "default backup asked for an immediate checkpoint: $C1" ;;
*"checkpoint starting: force wait"*) pb_test_ok "PostgreSQL ran a spread checkpoint (force wait)" ;;
*) pb_test_fail "no checkpoint line from pg_backup_start in $PGLOG: '$C1'" ;;
esac

# 2. Pinned, slowed to a few seconds so the running process can be inspected, and a
# fast checkpoint.
N0=$(wc -l <"$PGLOG")
pg_psql "$SRC" "CREATE TABLE polite(x int); INSERT INTO polite SELECT generate_series(1,1000)" \
    >/dev/null
B2=$PB_WORK/b2.log
pb backup --type full --checkpoint fast --read-size 256k --queue-depth 3 --max-rate 40M \
    --cpu-weight 50 >"$B2" 2>&1 &
BG=$!
# descendants of the background job named pageback (pb runs it as postgres)
find_pb() {
    local p c
    for p in $(pgrep -P "$1" 2>/dev/null); do
        c=$(cat "/proc/$p/comm" 2>/dev/null)
        [ "$c" = pageback ] && { echo "$p"; return 0; }
        find_pb "$p" && return 0
    done
    return 1
}
POLICY=none NICE_OK=0 IOCLASS= MAIN_POLICY=none CHECK_POLICY=none
for _ in $(seq 1 100); do
    PID=$(find_pb "$BG") || { sleep 0.1; continue; }
    for st in /proc/"$PID"/task/*/stat; do
        f=$(sed 's/.*) //' "$st" 2>/dev/null) || continue
        # after the comm: field 3 is first; nice is field 19, policy field 41
        set -- $f
        [ "${39:-}" = 5 ] && POLICY=idle
        [ "${17:-}" = 19 ] && NICE_OK=1
        # the main thread (task id = pid) checks and hashes the pages it reads
        if [ "$st" = "/proc/$PID/task/$PID/stat" ]; then
            [ "${39:-}" = 5 ] && MAIN_POLICY=idle
            [ "${39:-}" != 5 ] && [ "${17:-}" = 19 ] && MAIN_POLICY=nice19
        fi
        # the scanner's check thread runs the page checks (engine/scan/scan_check.c)
        if [ "$(cat "${st%/stat}/comm" 2>/dev/null)" = pb-check ]; then
            [ "${39:-}" = 5 ] && CHECK_POLICY=idle
            [ "${39:-}" != 5 ] && [ "${17:-}" = 19 ] && CHECK_POLICY=nice19
        fi
    done
    case "$IOCLASS" in idle*) ;; *) IOCLASS=$(ionice -p "$PID" 2>/dev/null) ;; esac
    case "$POLICY$IOCLASS$MAIN_POLICY" in idleidle*idle) [ "$CHECK_POLICY" = none ] || break ;; esac
    sleep 0.1
done
wait "$BG"
RC=$?
pb_assert_eq "$RC" 0 "pinned, rate-limited backup with a fast checkpoint"
[ "$RC" = 0 ] || cat "$B2"
ID2=$(pb_last_id)
DIGEST2=$(pg_digest_all "$SRC")
if [ "$POLICY" = idle ] || [ "$NICE_OK" = 1 ]; then
    pb_test_ok "a worker thread of the running backup is SCHED_IDLE or nice 19 (policy $POLICY)"
else
    pb_test_fail "no SCHED_IDLE or nice 19 thread seen in the running backup"
fi
case "$MAIN_POLICY" in
idle|nice19) pb_test_ok "the reading (page-checking, hashing) thread is $MAIN_POLICY too" ;;
*) pb_test_fail "the running backup's reading thread is not SCHED_IDLE or nice 19" ;;
esac
case "$CHECK_POLICY" in
idle|nice19) pb_test_ok "the check thread (page checks, hashing) is $CHECK_POLICY too" ;;
*) pb_test_fail "the running backup's check thread (pb-check) is not SCHED_IDLE or nice 19" ;;
esac
pb_log_has "$B1" "CPU priority: reading thread \(page checks, hashing\) (SCHED_IDLE|nice 19)" \
    "the log says the reading thread's CPU priority"
case "$IOCLASS" in
idle*) pb_test_ok "the running backup's I/O class is idle (ionice: $IOCLASS)" ;;
*) pb_test_fail "the running backup's I/O class is '$IOCLASS', not idle" ;;
esac
pb_log_has "$B2" "reading 256 KiB x 3 in flight \(pinned" "--read-size and --queue-depth pin the reads"
pb_log_has "$B2" "I/O: pinned, [0-9]+\.\.3 in flight \(peak 3, final 3\): 0 grows, 0 plateaus, 0 cuts, 0 yields" \
    "a pinned scan makes no adaptive decision"
pb_log_has "$B2" "checkpoint \(fast\) took" "the log reports the fast checkpoint's wait"
pb_log_has "$B2" "(CPU weight: cgroup .*(cpu.shares|cpu.weight)|--cpu-weight 50 not applied: )" \
    "the log says whether --cpu-weight was applied"
C2=$(ckpt_since "$N0")
case "$C2" in
*"checkpoint starting: immediate force wait"*) pb_test_ok "PostgreSQL ran an immediate checkpoint" ;;
*) pb_test_fail "--checkpoint fast did not reach PostgreSQL: '$C2'" ;;
esac

# 3. A memory bound below one request plus the compression queue is refused clearly.
if pb backup --type full --max-memory 1M >"$PB_WORK/b3.log" 2>&1; then
    pb_test_fail "--max-memory 1M was accepted"
else
    pb_log_has "$PB_WORK/b3.log" "--max-memory 1048576 bytes is too small: one read request of 512 KiB plus" \
        "--max-memory too small for one request is refused, naming what is needed"
fi
pb_check "a backup under --max-memory 5M" pb_backup_to "$PB_WORK/b4.log" --type full --max-memory 5M
pb_log_has "$PB_WORK/b4.log" "--max-memory 5 MiB: at most 6 reads in flight \(of 8\) and 2 compression buffers \(of 12\)" \
    "--max-memory bounds both the reads in flight and the compression queue (2 x 1 MiB + 6 x 512 KiB)"
pb_log_has "$PB_WORK/b4.log" "peak RSS [0-9.]+ MiB \(buffers 5.0 MiB\)" "the report gives peak RSS and the bounded buffers"

# 4. What the reads cost others' reads, against the budget, is in the log; a budget that
# is no ratio is refused, naming the variable, and takes no backup.
pb_log_has "$B1" "cost to others' reads: .*budget 1\.30x|no block device found under" \
    "the log gives what the reads cost others' reads and the budget"
LAST_BEFORE=$(pb_last_id)
if PAGEBACK_READ_BUDGET=0.5 pb backup --type full >"$PB_WORK/b5.log" 2>&1; then
    pb_test_fail "PAGEBACK_READ_BUDGET=0.5 was accepted"
else
    pb_log_has "$PB_WORK/b5.log" "PAGEBACK_READ_BUDGET=\"0\.5\": not a ratio from 1\.05 to 10" \
        "a bad PAGEBACK_READ_BUDGET is refused, naming the variable"
fi
pb_assert_eq "$(pb_last_id)" "$LAST_BEFORE" "the refused backup left no backup behind"

# 5. Both backups restore byte-exact.
pb_check "restore of the adaptive backup starts" pb_restore_start "$PB_WORK/r1" --set "$ID1"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r1")" "$DIGEST1" "adaptive backup: restored digests equal the source"
pg_stop "$PB_WORK/r1"
pb_check "restore of the pinned backup starts" pb_restore_start "$PB_WORK/r2" --set "$ID2"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r2")" "$DIGEST2" "pinned backup: restored digests equal the source"
pg_stop "$PB_WORK/r2"
pb_test_summary
