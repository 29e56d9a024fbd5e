/*
 * tests/unit/engine/pack/pack_read_test.c — the pack-reading source (engine/pack/pack_read.c):
 * read plans coalesce frames across small gaps into bounded ranges and refuse hostile
 * locations naming the pack; the source serves frames from one range read (counted
 * with repo_requests) and reads ahead only when reads run sequentially.
 */
#include "engine/pack/pack.h"
#include "tests/unit/fixtures.h"

#include <stdlib.h>
#include <string.h>

#define KEY "backup/20260101-000000F/pack/000001"

static pack_loc loc(uint64_t offset, uint32_t clen)
{
    return (pack_loc){1, offset, clen, clen - PACK_FRAME_HEADER};
}

static void test_plan_coalesces(void)
{
    pb_error e = PB_ERROR_INIT;
    pack_range rg[8];
    size_t n = 99;
    /* adjacent, then a gap of exactly PACK_PLAN_GAP (joined), then one byte more (split) */
    pack_loc f[4] = {loc(16, 100), loc(116, 200), loc(316 + PACK_PLAN_GAP, 64),
                     loc(380 + 2 * PACK_PLAN_GAP + 1, 64)};
    PBT_CHECK(pack_plan(KEY, f, 4, rg, &n, &e) == 0);
    PBT_CHECK(n == 2);
    PBT_CHECK(rg[0].start == 16 && rg[0].len == 380 + PACK_PLAN_GAP - 16);
    PBT_CHECK(rg[0].first == 0 && rg[0].count == 3);
    PBT_CHECK(rg[1].start == f[3].offset && rg[1].len == 64 && rg[1].first == 3 &&
              rg[1].count == 1);
    PBT_CHECK(pack_plan(KEY, f, 0, rg, &n, &e) == 0 && n == 0);
}

static void test_plan_max_range(void)
{
    pb_error e = PB_ERROR_INIT;
    /* 20 adjacent frames of 1 MiB: ranges never exceed PACK_PLAN_MAX_RANGE */
    pack_loc f[20];
    pack_range rg[20];
    uint32_t clen = PACK_MAX_FRAME_STORED;
    for (int i = 0; i < 20; i++)
        f[i] = loc(16 + (uint64_t)i * clen, clen);
    size_t n = 0, covered = 0;
    PBT_CHECK(pack_plan(KEY, f, 20, rg, &n, &e) == 0);
    size_t per = PACK_PLAN_MAX_RANGE / clen; /* whole frames that fit one range */
    PBT_CHECK(n == (20 + per - 1) / per);
    for (size_t i = 0; i < n; i++) {
        PBT_CHECK(rg[i].len <= PACK_PLAN_MAX_RANGE);
        PBT_CHECK(rg[i].first == covered);
        covered += rg[i].count;
    }
    PBT_CHECK(covered == 20);
}

static void test_plan_shared_frames(void)
{
    pb_error e = PB_ERROR_INIT;
    /* three runs share the frame at 16, a fourth has its own */
    pack_loc f[4] = {loc(16, 500), loc(16, 500), loc(16, 500), loc(516, 40)};
    pack_range rg[4];
    size_t n = 0;
    PBT_CHECK(pack_plan(KEY, f, 4, rg, &n, &e) == 0);
    PBT_CHECK(n == 1 && rg[0].start == 16 && rg[0].len == 540 && rg[0].count == 4);
}

/* Each hostile plan is refused as corruption naming the pack and the offset. */
static void refused(const pack_loc *f, size_t n, const char *offset_text)
{
    pb_error e = PB_ERROR_INIT;
    pack_range rg[4];
    size_t nr = 7;
    PBT_CHECK(pack_plan(KEY, f, n, rg, &nr, &e) == PB_ECORRUPT);
    PBT_CHECK(nr == 0);
    PBT_CHECK(strstr(e.msg, KEY) != NULL);
    PBT_CHECK(strstr(e.msg, offset_text) != NULL);
    if (!strstr(e.msg, KEY) || !strstr(e.msg, offset_text))
        fprintf(stderr, "message: %s\n", e.msg);
}

static void test_plan_hostile(void)
{
    pack_loc small[2] = {loc(16, 100), {1, 200, 8, 0}}; /* shorter than a frame header */
    refused(small, 2, "offset 200");
    pack_loc huge[1] = {{1, 16, PACK_MAX_FRAME_STORED + 1, 100}};
    refused(huge, 1, "offset 16");
    pack_loc raw[1] = {{1, 16, 100, PACK_MAX_FRAME_RAW + 1}};
    refused(raw, 1, "offset 16");
    pack_loc in_header[1] = {loc(4, 100)};
    refused(in_header, 1, "offset 4");
    pack_loc wraps[1] = {loc(UINT64_MAX - 50, 100)};
    refused(wraps, 1, "offset 18446744073709551565");
    pack_loc unsorted[2] = {loc(1000, 100), loc(16, 100)};
    refused(unsorted, 2, "offset 16");
    pack_loc overlap[2] = {loc(16, 100), loc(100, 100)};
    refused(overlap, 2, "offset 100");
    pack_loc same_start[2] = {loc(16, 100), loc(16, 200)}; /* not one frame: overlap */
    refused(same_start, 2, "offset 16");
}

static char root[256];

/* A pack of 64 frames of 8 kB; every other one is needed (gaps of one frame): one
 * ranged GET serves all. */
static void test_source_one_read(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_writer *w = NULL;
    PBT_CHECK(pack_writer_open(&w, r, "backup/X", 64u << 20, 1, &e) == 0);
    static uint8_t page[PB_PAGE_SIZE], back[PB_PAGE_SIZE];
    pack_loc all[64], need[32];
    for (int i = 0; i < 64; i++) {
        /* incompressible (the pack is ~64 x 8 kB, for the readahead test below) */
        uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        for (size_t k = 0; k < sizeof(page); k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            page[k] = (uint8_t)x;
        }
        page[0] = (uint8_t)i;
        PBT_CHECK(pack_write_frame(w, page, sizeof(page), &all[i], &e) == 0);
        if (i % 2)
            need[i / 2] = all[i];
    }
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    char key[256];
    pack_key(key, sizeof(key), "backup/X", 1);
    pack_range rg[32];
    size_t n = 0;
    PBT_CHECK(pack_plan(key, need, 32, rg, &n, &e) == 0);
    PBT_CHECK(n == 1 && rg[0].count == 32);
    pack_source *s = NULL;
    pack_reader *rd = NULL;
    PBT_CHECK(pack_source_new(&s, r, &e) == 0 && pack_reader_new(&rd, &e) == 0);
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    const uint8_t *base = NULL;
    PBT_CHECK(pack_source_fetch(s, key, rg[0].start, (size_t)rg[0].len, &base, &e) == 0);
    for (size_t i = 0; base && i < 32; i++) {
        size_t got = 0;
        PBT_CHECK(pack_reader_decode(rd, base + (need[i].offset - rg[0].start), need[i].clen,
                                     back, sizeof(back), &got, "frame", &e) == 0);
        PBT_CHECK(got == PB_PAGE_SIZE && back[0] == (uint8_t)(2 * i + 1));
        /* a frame inside the range is served from memory */
        const uint8_t *again = NULL;
        PBT_CHECK(pack_source_fetch(s, key, need[i].offset, need[i].clen, &again, &e) == 0);
        PBT_CHECK(again == base + (need[i].offset - rg[0].start));
    }
    repo_requests_get(r, &q1);
    repo_requests d = repo_requests_since(&q1, &q0);
    PBT_CHECK(d.get_range == 1 && repo_requests_total(&d) == 1);
    PBT_CHECK(pack_source_fetched(s) == rg[0].len);
    /* hostile lengths never reach the repository */
    PBT_CHECK(pack_source_fetch(s, key, 16, (size_t)PACK_PLAN_MAX_RANGE + PACK_MAX_FRAME_STORED +
                                1, &base, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, key) != NULL);
    PBT_CHECK(pack_source_fetch(s, key, UINT64_MAX - 10, 100, &base, &e) == PB_ECORRUPT);
    repo_requests_get(r, &q0);
    d = repo_requests_since(&q0, &q1);
    PBT_CHECK(repo_requests_total(&d) == 0);
    pack_reader_free(rd);
    pack_source_free(s);
    repo_free(r);
}

/* Reads that follow each other through a pack grow ahead: the next frames come from
 * memory; the reads ahead learn the pack's size themselves (repo_get_range_upto), so
 * no HEAD is sent (one per pack before). */
static void test_source_readahead(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    char key[256];
    pack_key(key, sizeof(key), "backup/X", 1);
    pack_source *s = NULL;
    PBT_CHECK(pack_source_new(&s, r, &e) == 0);
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    const uint8_t *base = NULL;
    uint64_t off = 16;
    for (int i = 0; i < 64; i++) {
        PBT_CHECK(pack_source_fetch(s, key, off, 100, &base, &e) == 0);
        off += 4000; /* small gaps: still sequential */
    }
    repo_requests_get(r, &q1);
    repo_requests d = repo_requests_since(&q1, &q0);
    PBT_CHECK(d.head == 0);
    PBT_CHECK(d.get_range >= 2 && d.get_range <= 3);
    pack_source_free(s);
    repo_free(r);
}

/* A full backup's consecutive files alternate between the packs of its writers: reads
 * running sequentially through two packs at once keep their readahead (one buffer per
 * pack), so 2 x 64 small reads cost a few ranged GETs, not 128. */
static void test_source_two_packs(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_writer *w[2] = {NULL, NULL};
    static uint8_t data[4000];
    pack_loc at[2][64];
    for (int k = 0; k < 2; k++) {
        PBT_CHECK(pack_writer_open(&w[k], r, "backup/Y", 64u << 20, 1, &e) == 0);
        pack_writer_set_first(w[k], 1 + 100000u * (uint32_t)k);
    }
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < 2; k++) {
            for (size_t b = 0; b < sizeof(data); b++)
                data[b] = (uint8_t)((b * 2654435761u) >> (8 + (i + k) % 8));
            PBT_CHECK(pack_write_frame(w[k], data, sizeof(data), &at[k][i], &e) == 0);
        }
    for (int k = 0; k < 2; k++) {
        PBT_CHECK(pack_writer_finish(w[k], &e) == 0);
        pack_writer_free(w[k]);
    }
    pack_source *s = NULL;
    PBT_CHECK(pack_source_new(&s, r, &e) == 0);
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < 2; k++) {
            char key[256];
            const uint8_t *base = NULL;
            pack_key(key, sizeof(key), "backup/Y", at[k][i].pack_no);
            PBT_CHECK(pack_source_fetch(s, key, at[k][i].offset, at[k][i].clen, &base, &e) == 0);
        }
    repo_requests_get(r, &q1);
    repo_requests d = repo_requests_since(&q1, &q0);
    PBT_CHECK(d.get_range <= 6 && d.head == 0);
    if (d.get_range > 6)
        fprintf(stderr, "%llu ranged GETs\n", (unsigned long long)d.get_range);
    pack_source_free(s);
    repo_free(r);
}

/* Under the smallest budget, fetches across 6 packs of 6 MiB (largest ranges, small
 * frames, sequential runs and jumps back) each return the right bytes, every byte of
 * them readable (ASan) until the next call, and the source's buffers never hold more
 * than the budget together (the old source let 4 buffers grow to 9 MiB each). */
static void test_source_budget(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    enum { PACKS = 6 };
    static uint8_t obj[6u << 20];
    char key[PACKS][256];
    for (int k = 0; k < PACKS; k++) {
        for (size_t b = 0; b < sizeof(obj); b++)
            obj[b] = (uint8_t)(b * 31u + (size_t)k * 7u + (b >> 12));
        snprintf(key[k], sizeof(key[k]), "backup/Z/pack/%06d", k + 1);
        PBT_CHECK(repo_put(r, key[k], obj, sizeof(obj), &e) == 0);
    }
    pack_source *s = NULL;
    PBT_CHECK(pack_source_new(&s, r, &e) == 0);
    PBT_CHECK(pack_source_set_budget(s, PACK_SOURCE_MIN_BUDGET - 1, &e) == PB_EINVAL);
    PBT_CHECK(pack_source_set_budget(s, PACK_SOURCE_MIN_BUDGET, &e) == 0);
    uint64_t most = 0;
    size_t big = (size_t)PACK_PLAN_MAX_RANGE + PACK_MAX_FRAME_STORED;
    for (int round = 0; round < 40; round++) {
        int k = (round * 5) % PACKS;
        uint64_t start = round % 3 == 0 ? 16 : (uint64_t)(round * 40000) % (1u << 20);
        size_t len = round % 3 == 0 ? big : 4000;
        for (int step = 0; step < (round % 3 == 0 ? 1 : 12); step++) {
            const uint8_t *p = NULL;
            uint64_t at = start + (uint64_t)step * 5000; /* sequential: reads ahead */
            PBT_CHECK(pack_source_fetch(s, key[k], at, len, &p, &e) == 0);
            size_t bad = 0;
            for (size_t b = 0; p && b < len; b++) {
                uint64_t o = at + b;
                bad += p[b] != (uint8_t)(o * 31u + (uint64_t)k * 7u + (o >> 12));
            }
            PBT_CHECK(p != NULL && bad == 0);
            if (pack_source_held(s) > most)
                most = pack_source_held(s);
        }
    }
    PBT_CHECK(most > 0 && most <= PACK_SOURCE_MIN_BUDGET);
    if (most > PACK_SOURCE_MIN_BUDGET)
        fprintf(stderr, "buffers held %llu bytes\n", (unsigned long long)most);
    pack_source_free(s);
    repo_free(r);
}

/* pack_write_runs: every run of a shared frame gets the frame's location; a run that
 * does not fit the frame is refused before anything is written. */
static void test_write_runs(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_writer *w = NULL;
    PBT_CHECK(pack_writer_open(&w, r, "backup/Z", 64u << 20, 1, &e) == 0);
    static uint8_t pages[5 * PB_PAGE_SIZE];
    memset(pages, 7, sizeof(pages));
    mf_run runs[2] = {{1, 2, 0, 0, 0, 0, 0}, {10, 3, 0, 0, 0, 0, 2}};
    PBT_CHECK(pack_write_runs(w, pages, sizeof(pages), runs, 2, 9, &e) == 0);
    PBT_CHECK(runs[0].pack_no == 1 && runs[0].offset == PACK_HEADER_LEN);
    PBT_CHECK(runs[1].pack_no == runs[0].pack_no && runs[1].offset == runs[0].offset &&
              runs[1].clen == runs[0].clen && runs[1].rlen == sizeof(pages));
    PBT_CHECK(runs[0].first == 1 && runs[1].first == 10 && runs[1].frame_page == 2);
    uint64_t stored = pack_writer_stored_bytes(w);
    mf_run bad[2] = {{1, 2, 0, 0, 0, 0, 0}, {10, 3, 0, 0, 0, 0, 3}};
    PBT_CHECK(pack_write_runs(w, pages, sizeof(pages), bad, 2, 0, &e) == PB_EINVAL);
    PBT_CHECK(pack_writer_stored_bytes(w) == stored && bad[0].clen == 0);
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {
        PBT_CASE(test_plan_coalesces),     PBT_CASE(test_plan_max_range),
        PBT_CASE(test_plan_shared_frames), PBT_CASE(test_plan_hostile),
        PBT_CASE(test_source_one_read),    PBT_CASE(test_source_readahead),
        PBT_CASE(test_source_two_packs),   PBT_CASE(test_source_budget),
        PBT_CASE(test_write_runs)};
    return pbt_main_in_tmpdir(root, sizeof(root), "pack-read-test", cases, PBT_COUNT(cases));
}
