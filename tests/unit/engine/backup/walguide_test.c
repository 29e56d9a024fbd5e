/*
 * tests/unit/engine/backup/walguide_test.c — engine/backup/walguide.c: the WAL block set
 * gives each relation segment its named blocks sorted and distinct, the same whether it stayed in
 * memory or spilled sorted runs to disk (a tiny memory limit forces many runs, with
 * duplicates across them); marked relations and databases are read whole; paths map to
 * the right keys.
 */
#include "engine/backup/walguide_internal.h"
#include "engine/wal/wal.h"
#include "tests/unit/pbtest.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];

static size_t files_in(const char *d)
{
    size_t n = 0;
    DIR *dp = opendir(d);
    struct dirent *de;
    while (dp && (de = readdir(dp)))
        n += de->d_name[0] != '.';
    if (dp)
        closedir(dp);
    return n;
}

/* Blocks 0, 3, 6, ... of relation 16384 segment 0 and 1, every one added three times in a
 * scattered order, plus relation 16385 block 7. */
static void fill_and_check(size_t limit)
{
    pb_error err = PB_ERROR_INIT;
    wg_set *s = NULL;
    PBT_CHECK(wg_set_open(&s, dir, limit, &err) == 0);
    wg_key a0 = {1663, 5, 16384, 0, 0}, a1 = {1663, 5, 16384, 0, 1};
    wg_key b = {1663, 5, 16385, 0, 0}, c = {1663, 5, 16386, 0, 0}, d = {1700, 9, 1, 0, 0};
    for (int rep = 0; rep < 3; rep++)
        for (uint32_t i = 0; i < 1000; i++) {
            uint32_t blk = ((i * 7919u) % 1000u) * 3u;
            PBT_CHECK(wg_set_add(s, (i & 1) ? &a1 : &a0, blk, &err) == 0);
        }
    PBT_CHECK(wg_set_add(s, &b, 7, &err) == 0);
    PBT_CHECK(wg_set_add(s, &c, 1, &err) == 0);
    PBT_CHECK(wg_set_mark_rel(s, 1663, 5, 16386, &err) == 0);
    PBT_CHECK(wg_set_mark_db(s, 1700, 9, &err) == 0);
    PBT_CHECK(wg_set_finish(s, &err) == 0);
    if (limit && limit < 100)
        PBT_CHECK(wg_set_spilled(s) > 0);
    else
        PBT_CHECK(wg_set_spilled(s) == 0);
    uint32_t *blk = NULL;
    size_t n = 0;
    PBT_CHECK(wg_set_blocks(s, &a0, &blk, &n, &err) == 0);
    int sorted = n > 0;
    for (size_t i = 1; i < n; i++)
        sorted &= blk[i - 1] < blk[i] && blk[i] % 3 == 0;
    PBT_CHECK(sorted);
    size_t n0 = n;
    free(blk);
    PBT_CHECK(wg_set_blocks(s, &a1, &blk, &n, &err) == 0);
    PBT_CHECK(n0 + n == 1000); /* each of the 1000 (i -> blk) pairs once */
    free(blk);
    PBT_CHECK(wg_set_blocks(s, &b, &blk, &n, &err) == 0 && n == 1 && blk && blk[0] == 7);
    free(blk);
    wg_key none = {1663, 5, 99999, 0, 0};
    PBT_CHECK(wg_set_blocks(s, &none, &blk, &n, &err) == 0 && n == 0 && !blk);
    PBT_CHECK(wg_set_blocks(s, &c, &blk, &n, &err) == PB_ENOENT);
    PBT_CHECK(wg_set_blocks(s, &d, &blk, &n, &err) == PB_ENOENT);
    PBT_CHECK(wg_set_count(s) == 1000 + 2);
    wg_set_free(s);
    PBT_CHECK(files_in(dir) == 0); /* the spill files are gone */
}

static void test_in_memory(void) { fill_and_check(0); }
static void test_spilled(void) { fill_and_check(40); }

/* A set that saw no changed block and no dropped relation (a quiet interval of WAL)
 * finishes and answers "nothing" for every relation (it once passed qsort a NULL array,
 * undefined behaviour that UBSan stops at). */
static void test_empty(void)
{
    pb_error err = PB_ERROR_INIT;
    wg_set *s = NULL;
    PBT_CHECK(wg_set_open(&s, dir, 0, &err) == 0);
    PBT_CHECK(wg_set_finish(s, &err) == 0);
    PBT_CHECK(wg_set_count(s) == 0);
    uint32_t *blk = NULL;
    size_t n = 1;
    wg_key k = {1663, 5, 16384, 0, 0};
    PBT_CHECK(wg_set_blocks(s, &k, &blk, &n, &err) == 0 && n == 0 && !blk);
    wg_set_free(s);
}

static void test_paths(void)
{
    wg_key k;
    PBT_CHECK(wg_key_from_path("base/5/16384", "PG_15_1", &k) && k.spc == 1663 && k.db == 5 &&
              k.rel == 16384 && k.fork == 0 && k.seg == 0);
    PBT_CHECK(wg_key_from_path("base/5/16384.3", "PG_15_1", &k) && k.seg == 3);
    PBT_CHECK(wg_key_from_path("base/5/16384_vm", "PG_15_1", &k) && k.fork == 2);
    PBT_CHECK(wg_key_from_path("base/5/16384_fsm.1", "PG_15_1", &k) && k.fork == 1 && k.seg == 1);
    PBT_CHECK(wg_key_from_path("global/1262", "PG_15_1", &k) && k.spc == 1664 && k.db == 0);
    PBT_CHECK(wg_key_from_path("pg_tblspc/16400/PG_15_1/5/16500_init", "PG_15_1", &k) &&
              k.spc == 16400 && k.db == 5 && k.rel == 16500 && k.fork == 3);
    PBT_CHECK(!wg_key_from_path("pg_tblspc/16400/PG_14_9/5/16500", "PG_15_1", &k));
    PBT_CHECK(!wg_key_from_path("base/5/pg_filenode.map", "PG_15_1", &k));
    PBT_CHECK(!wg_key_from_path("base/5/16384_xx", "PG_15_1", &k));
    PBT_CHECK(!wg_key_from_path("pg_xact/0000", "PG_15_1", &k));
}

/* The window reads its last segment from pg_wal only through the WAL page holding its end:
 * the rest is WAL after this backup's start, or a recycled segment's old bytes. */
static void test_local_len(void)
{
    const uint32_t seg = 16u << 20;
    PBT_CHECK(wg_local_len(seg, 5ull * seg + 0x1234) == ARCH_WAL_PAGE);
    PBT_CHECK(wg_local_len(seg, 5ull * seg + 3 * ARCH_WAL_PAGE) == 4 * ARCH_WAL_PAGE);
    PBT_CHECK(wg_local_len(seg, 5ull * seg + 3 * ARCH_WAL_PAGE - 1) == 3 * ARCH_WAL_PAGE);
    PBT_CHECK(wg_local_len(seg, 6ull * seg - 1) == seg);
    PBT_CHECK(wg_local_len(seg, 6ull * seg) == ARCH_WAL_PAGE);
    /* 1 GiB segments (initdb --wal-segsize): a window ending early reads a page, not 1 GiB. */
    PBT_CHECK(wg_local_len(1u << 30, 7ull * (1u << 30) + 40) == ARCH_WAL_PAGE);
    PBT_CHECK(wg_local_len(1u << 30, 8ull * (1u << 30) - 8) == 1u << 30);
}

int main(void)
{
    if (pbt_tmpdir(dir, sizeof(dir), "walguide") != 0)
        return 1;
    PBT_RUN(test_in_memory);
    PBT_RUN(test_spilled);
    PBT_RUN(test_empty);
    PBT_RUN(test_paths);
    PBT_RUN(test_local_len);
    pbt_rmtree(dir);
    return PBT_DONE();
}
