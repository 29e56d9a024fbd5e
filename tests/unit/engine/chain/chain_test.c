/*
 * tests/unit/engine/chain/chain_test.c — engine/chain/chain_order.c: history order (stop LSN,
 * a synthetic full after the real backup it copies, never id order), the chain head, and retention
 * that keeps every ancestor a kept backup needs. The rebase scenario: full, incr 1,
 * incr 2, then a synthetic full of incr 1 whose id sorts last. And engine/chain/chain.c's one
 * object deletion, used by chain_drop and by expire for WAL.
 */
#include "engine/chain/chain.h"
#include "tests/unit/fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static char root[256];

static mf_backup hdr(const char *id, const char *parent, char type, uint64_t stop_lsn,
                     int64_t stop_time)
{
    mf_backup h = pbt_header(id, parent, type);
    h.start_lsn = stop_lsn - 0x100;
    h.stop_lsn = stop_lsn;
    h.stop_time = stop_time;
    return h;
}

#define F "20260101-000000F"
#define I1 "20260101-000100I"
#define I2 "20260101-000200I"
#define S1 "20260101-000300S" /* rebase --set I1: made last, holds I1's state */

static void rebase_scenario(repo *r)
{
    mf_backup f = hdr(F, "", 'F', 0x1000000, 100), i1 = hdr(I1, F, 'I', 0x2000000, 160),
              i2 = hdr(I2, I1, 'I', 0x3000000, 220), s1 = hdr(S1, "", 'S', 0x2000000, 160);
    pbt_commit_header(r, &s1);
    pbt_commit_header(r, &f);
    pbt_commit_header(r, &i2);
    pbt_commit_header(r, &i1);
}

static void test_comparator(void)
{
    mf_backup a = hdr("20260101-000000F", "", 'F', 10, 5);
    mf_backup b = hdr("20250101-000000I", "x", 'I', 20, 1); /* older id, newer state */
    PBT_CHECK(chain_cmp_history(&a, &b) < 0);
    PBT_CHECK(chain_cmp_history(&b, &a) > 0);
    mf_backup s = hdr("20240101-000000S", "", 'S', 20, 1); /* same stop as b */
    PBT_CHECK(chain_cmp_history(&b, &s) < 0); /* the synthetic copy sorts after */
    mf_backup c = hdr("20240101-000000I", "x", 'I', 20, 2);
    PBT_CHECK(chain_cmp_history(&b, &c) < 0); /* same LSN: stop time decides */
    PBT_CHECK(chain_cmp_history(&a, &a) == 0);
}

static void test_history_order_and_head(void)
{
    repo *r = pbt_repo_open_in(root, "order");
    rebase_scenario(r);
    chain_history h;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(chain_history_load(r, &h, &err) == 0);
    PBT_CHECK(h.count == 4);
    const char *want[] = {F, I1, S1, I2};
    for (size_t i = 0; i < 4 && i < h.count; i++)
        PBT_CHECK(strcmp(h.items[i].id, want[i]) == 0);
    PBT_CHECK(chain_history_find(&h, S1) == &h.items[2]);
    PBT_CHECK(chain_history_find(&h, "nope") == NULL);
    chain_history_free(&h);
    chain_history_free(&h); /* twice is harmless */
    char head[MF_ID_LEN];
    PBT_CHECK(chain_head(r, head, &err) == 0);
    PBT_CHECK(strcmp(head, I2) == 0); /* not S1, whose id sorts last */
    repo_free(r);
    r = pbt_repo_open_in(root, "empty");
    PBT_CHECK(chain_head(r, head, &err) == PB_ENOENT);
    repo_free(r);
}

static void test_retain_keeps_parents(void)
{
    repo *r = pbt_repo_open_in(root, "retain");
    rebase_scenario(r);
    chain_history h;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(chain_history_load(r, &h, &err) == 0);
    bool keep[8];
    /* Newest full is S1; I2 comes after it and needs I1 and F: nothing goes. */
    PBT_CHECK(chain_retain(&h, 1, keep) == 4);
    for (size_t i = 0; i < h.count; i++)
        PBT_CHECK(keep[i]);
    chain_history_free(&h);
    /* A new full F2 after everything: retain 1 keeps F2 alone. */
    mf_backup f2 = hdr("20260101-000400F", "", 'F', 0x4000000, 300);
    pbt_commit_header(r, &f2);
    PBT_CHECK(chain_history_load(r, &h, &err) == 0);
    PBT_CHECK(chain_retain(&h, 1, keep) == 1 && keep[4] && !keep[3] && !keep[0]);
    PBT_CHECK(chain_retain(&h, 2, keep) == 5); /* S1 and later, and I2's parents */
    PBT_CHECK(chain_retain(&h, 9, keep) == 5); /* fewer fulls than asked: keep all */
    PBT_CHECK(chain_retain(&h, 0, keep) == 5);
    chain_history_free(&h);
    repo_free(r);
}

/* A damaged manifest fails the history (naming it): no "newest" decided without it. */
static void test_corrupt_manifest_fails(void)
{
    repo *r = pbt_repo_open_in(root, "corrupt");
    rebase_scenario(r);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(repo_put(r, "backup/" I2 "/manifest", "garbage", 7, &err) == 0);
    chain_history h;
    PBT_CHECK(chain_history_load(r, &h, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "backup/" I2 "/manifest") != NULL);
    PBT_CHECK(h.count == 0 && h.items == NULL);
    char head[MF_ID_LEN];
    PBT_CHECK(chain_head(r, head, &err) == PB_ECORRUPT);
    repo_free(r);
}

/* One deletion for backups and WAL: a missing object is not a failure. */
static void test_delete_object(void)
{
    repo *r = pbt_repo_open_in(root, "delete");
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(repo_put(r, "wal/0000000100000000/000000010000000000000001.zst", "x", 1,
                       &err) == 0);
    PBT_CHECK(chain_delete_object(r, "wal/0000000100000000/000000010000000000000001.zst") == 0);
    PBT_CHECK(repo_stat(r, "wal/0000000100000000/000000010000000000000001.zst", NULL, &err) ==
              PB_ENOENT);
    PBT_CHECK(chain_delete_object(r, "wal/0000000100000000/000000010000000000000001.zst") == 0);
    mf_backup h = hdr(F, "", 'F', 0x1000, 100);
    pbt_commit_header(r, &h);
    PBT_CHECK(repo_put(r, "backup/" F "/pack-0", "p", 1, &err) == 0);
    PBT_CHECK(chain_drop(r, F, &err) == 0);
    PBT_CHECK(repo_stat(r, "backup/" F "/manifest", NULL, &err) == PB_ENOENT);
    PBT_CHECK(repo_stat(r, "backup/" F "/pack-0", NULL, &err) == PB_ENOENT);
    PBT_CHECK(chain_drop(r, F, &err) == 0); /* dropping what is gone is fine */
    repo_free(r);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A backup right after another in the same second takes the next id at once: its id sorts
 * after the latest as a whole string (a later microsecond, or a later type letter), so no
 * wait for the next second (which cost up to a second per backup taken in quick
 * succession). Only a full after an incremental of the same second waits, for the rest
 * of that second alone. */
static void test_new_id_same_second(void)
{
    for (int i = 0; i < 20; i++) {
        char a[MF_ID_LEN], b[MF_ID_LEN];
        chain_new_id(a, i % 2 ? 'I' : 'F', NULL);
        double t0 = now_s();
        chain_new_id(b, 'I', a);
        double waited = now_s() - t0;
        PBT_CHECK(strcmp(b, a) > 0);
        PBT_CHECK(b[15] == 'I');
        PBT_CHECK(waited < 0.2); /* the rest of a second was waited before */
    }
    char inc[MF_ID_LEN], full[MF_ID_LEN];
    chain_new_id(inc, 'I', NULL);
    double t0 = now_s();
    chain_new_id(full, 'F', inc);
    double waited = now_s() - t0;
    PBT_CHECK(strcmp(full, inc) > 0);
    PBT_CHECK(strncmp(full, inc, 15) > 0); /* F sorts before I: the next second */
    PBT_CHECK(waited < 1.01);
    /* Older ids without the suffix stay ordered below the new ones of their second. */
    char old[MF_ID_LEN], next[MF_ID_LEN];
    snprintf(old, sizeof(old), "%.16s", inc);
    chain_new_id(next, 'I', old);
    PBT_CHECK(strcmp(next, old) > 0);
}

int main(void)
{
    static const pbt_case cases[] = {
        PBT_CASE(test_comparator), PBT_CASE(test_history_order_and_head),
        PBT_CASE(test_retain_keeps_parents), PBT_CASE(test_corrupt_manifest_fails),
        PBT_CASE(test_delete_object), PBT_CASE(test_new_id_same_second)};
    return pbt_main_in_tmpdir(root, sizeof(root), "chain-test", cases, PBT_COUNT(cases));
}
