#!/bin/bash
# tests/integration/restore_pool.sh — a restore's workers share one read pool
# (engine/pack/pack.h, "one budget shared by several sources"). Eight databases,
# each with a 13 MB table of hex text after ~300 catalog files, so the big files land in
# different workers' batches and are rebuilt at the same time, as the segments of a
# large table are. Restored with --jobs 8: with a budget per worker the sources held up
# to 8 x 6 MiB of 4 MiB ranges and read-ahead at once (peak RSS 53-57 MiB here); with
# the pool they hold their floors (one frame each) and the pool (two full sources: 8 +
# 10 MiB; 44-45 MiB): the peak RSS (--report peak_rss_bytes) stays under RSS_BOUND_MIB
# (48). The bound also holds only with glibc's mmap threshold fixed at 512 KiB
# (tools/pageback.c; 50 MiB without it, once): with the
# dynamic threshold every freed 4 MiB range raises it, and the next ranges come from
# the workers' arenas, which keep them. The restore holds the source's contents, and
# --jobs 1 reads with as few requests as before (4 MiB ranges: one worker alone takes
# the pool). pgbench -s 1; fast (about 40 seconds).
source "$(dirname "$0")/pb_lib.sh"
RSS_BOUND_MIB=${RSS_BOUND_MIB:-48}
pb_setup
pb_pgbench_source 1
pb_report_dir
for d in 1 2 3 4 5 6 7 8; do
    pg_psql "$SRC" "CREATE DATABASE pool$d" >/dev/null || pb_die "create database pool$d"
    pg_psql "$SRC" "CREATE TABLE noise AS SELECT g, md5(random()::text) a,
        md5(random()::text) b, md5(random()::text) c FROM generate_series(1, 100000) g" \
        pool$d >/dev/null || pb_die "noise table in pool$d"
done
pg_psql "$SRC" "CHECKPOINT" >/dev/null
pb_check "full backup" pb backup --type full --quiet
DIGEST=$(pg_digest_all "$SRC")
LAST=$(pb_last_id)

if pb_restore_start "$PB_WORK/rs" --set "$LAST" --jobs 8 --report "$OUT/rs.json"; then
    pb_test_ok "the backup restores with --jobs 8"
    pb_assert_eq "$(pg_digest_all "$PB_WORK/rs")" "$DIGEST" "the restore holds the source's contents"
    pg_stop "$PB_WORK/rs"
else
    pb_test_fail "restore with --jobs 8"
fi
pb_check_rss "$OUT/rs.json" "$RSS_BOUND_MIB" "the restore with 8 workers"

mkdir -p "$PB_WORK/one" && chmod 0700 "$PB_WORK/one" && _pb_chown_pg "$PB_WORK/one"
pb_check "restore with --jobs 1" pb restore --target-dir "$PB_WORK/one" --set "$LAST" \
    --jobs 1 --report "$OUT/one.json" >"$PB_WORK/one.out" 2>&1
pb_log "restore --jobs 1: $(grep -o 'object-store requests.*' "$PB_WORK/one.out"), peak RSS" \
    "$(pb_json "$OUT/one.json" '["peak_rss_bytes"] // 1048576') MiB"
pb_test_summary
