#!/bin/bash
# tests/integration/compress_adapt.sh — compression that keeps up (polite I/O): with
# --compress-level 12 (a ceiling slower than the reads) the adaptive level steps down
# while the reader waits on a full compression queue; the report names every level used
# (frames, bytes, seconds) and where the backup's time went (stages), the log says both,
# and the backup restores byte-exact. --compress-adapt off pins the level. pgbench -s 1.
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_pgbench "${PB_SCALE:-1}"
OUT=$PB_WORK/out
mkdir -p "$OUT" && _pb_chown_pg "$OUT"

# check REPORT PYTHON-CONDITION MSG: the condition holds on the report's JSON (d)
check() {
    if python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c, lv, st = d.get("compression") or {}, (d.get("compression") or {}).get("levels") or [], d.get("stages") or {}
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
    then pb_test_ok "$3"; else pb_test_fail "$3 ($(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d.get(k) for k in ("compression", "stages")}))' "$1" 2>&1 | head -c 1500))"; fi
}

# 1. Adaptive (the default) under a ceiling of 12. Normal CPU priority: on a busy test machine
# SCHED_IDLE threads may barely run (polite_io.sh checks the priorities themselves).
B1=$PB_WORK/b1.log
pb_check "full backup, --compress-level 12, adaptive" \
    pb_backup_to "$B1" --type full --compress-level 12 --cpu-priority normal --nice 0 \
    --report "$OUT/r1.json"
ID1=$(pb_last_id)
DIGEST1=$(pg_digest_all "$SRC")
R1=$OUT/r1.json
check "$R1" 'c["compress_adapt"] is True and c["level_ceiling"] == 12 and c["level_floor"] <= -1' \
    "the report says the level adapts, under ceiling 12"
check "$R1" 'c["level_downs"] >= 1 and len(lv) >= 2' \
    "compression behind the reads stepped the level down: more than one level used"
check "$R1" 'lv[0]["level"] == 12 and all(c["level_floor"] <= l["level"] <= 12 for l in lv)' \
    "the levels used lie between the floor and the ceiling, the ceiling first"
check "$R1" 'all(l["frames"] > 0 and l["raw_bytes"] > 0 and l["stored_bytes"] > 0 and l["seconds"] >= 0 for l in lv)' \
    "each level has its frames, raw and stored bytes, and seconds"
check "$R1" 'sum(l["raw_bytes"] for l in lv) >= d["backup"]["pages_changed"] * 8192' \
    "the levels account for every page shipped"
# The page checks run on the scanner's check thread (engine/scan/scan_check.c): its page work and
# queue waits add up to its time; the reading thread's waits fit in its scan time. The
# pipe's queue waits also hold the drain of the last files (drain_wait_seconds), which
# may run on the backup's own thread after the scan, outside the check thread's time.
check "$R1" 'st["scan_seconds"] > 0 and st["check_seconds"] > 0 and abs(st["queue_wait_seconds"] + st["page_work_seconds"] - st["check_seconds"]) <= 0.05 * st["check_seconds"] + 0.01 + st["drain_wait_seconds"] and st["read_wait_seconds"] + st["pause_seconds"] + st["check_wait_seconds"] <= 1.05 * st["scan_seconds"] + 0.01' \
    "stages: the check thread's page work and queue waits add up to its time; the reading thread's waits fit in its scan time"
check "$R1" 'st["queue_wait_seconds"] > 0 and st["compress_seconds"] > 0 and st["write_seconds"] > 0 and st["workers"] >= 1' \
    "stages: queue waits, compression and repository writes are measured"
check "$R1" 'd["io_applied"]["cpu_reader_applied"] != ""' "the report says the reading thread's CPU priority"
pb_log_has "$B1" "stages: reading thread [0-9.]+ s: read wait [0-9.]+ s, pauses [0-9.]+ s, waiting for the checks [0-9.]+ s; check thread [0-9.]+ s = page checks and hashing [0-9.]+ s \+ compression queue full [0-9.]+ s; [0-9]+ workers: compression [0-9.]+ s" \
    "the log's summary says where the time went"
pb_log_has "$B1" "compression levels \(adaptive, ceiling 12, floor -?[0-9]+, [1-9][0-9]* down, [0-9]+ up, final -?[0-9]+\): 12: " \
    "the log names the levels used"
pb_log_has "$B1" "CPU priority: reading thread \(page checks, hashing\) at the process's priority \(--cpu-priority normal\)" \
    "the log says the reading thread's CPU priority"

# 2. --compress-adapt off pins the level.
B2=$PB_WORK/b2.log
pb_check "full backup, --compress-level 9 --compress-adapt off" \
    pb_backup_to "$B2" --type full --compress-level 9 --compress-adapt off --cpu-priority normal \
    --nice 0 --report "$OUT/r2.json"
check "$OUT/r2.json" 'c["compress_adapt"] is False and c["level_downs"] == 0 and [l["level"] for l in lv] == [9]' \
    "pinned: every frame at level 9"
pb_log_has "$B2" "compression levels \(pinned, ceiling 9" "the log says the level was pinned"

# 3. The adaptive backup restores byte-exact (frames at fast levels are ordinary zstd).
pb_check "restore of the adaptive backup starts" pb_restore_start "$PB_WORK/r1" --set "$ID1"
pb_assert_eq "$(pg_digest_all "$PB_WORK/r1")" "$DIGEST1" "adaptive backup: restored digests equal the source"
pg_stop "$PB_WORK/r1"
pb_test_summary
