/*
 * tests/unit/engine/pack/page_test.c — page header decoding, checksum and verdicts, against real
 * pages written by PostgreSQL 15 (tests/fixtures/pages/, see its README for how they
 * were made and where the expected values come from).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pb.h"
#include "engine/pack/pack.h"
#include "tools/bench/checksum_ref.h"
#include "tests/unit/pbtest.h"

typedef struct fixture {
    char file[64];
    uint32_t blkno;
    uint64_t lsn;
    unsigned checksum, flags, lower, upper, special, prune_xid;
    uint8_t page[PB_PAGE_SIZE];
} fixture;

#define MAX_FIXTURES 16
static fixture fixtures[MAX_FIXTURES];
static int n_fixtures;

/* The fixture folder: $PB_FIXTURES_PAGES, else relative to this source file, which
 * works both in-tree and from a VPATH build directory (__FILE__ is then ../tests/...). */
static void fixture_dir(char *out, size_t len)
{
    const char *env = getenv("PB_FIXTURES_PAGES");
    if (env) {
        snprintf(out, len, "%s", env);
        return;
    }
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    if (slash)
        snprintf(out, len, "%.*s/../fixtures/pages", (int)(slash - src), src);
    else
        snprintf(out, len, "../fixtures/pages");
}

static int load_page(const char *dir, fixture *f)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, f->file);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t n = fread(f->page, 1, sizeof(f->page), fp);
    int extra = fgetc(fp);
    fclose(fp);
    return n == sizeof(f->page) && extra == EOF ? 0 : -1;
}

/* Lines "file blkno lsn checksum flags lower upper special prune_xid" of the README. */
static void load_fixtures(void)
{
    char dir[400], path[512], line[512];
    fixture_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/README", dir);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return;
    }
    while (fgets(line, sizeof(line), fp) && n_fixtures < MAX_FIXTURES) {
        fixture *f = &fixtures[n_fixtures];
        char lsn[32];
        if (sscanf(line, "%63s %" SCNu32 " %31s %u %u %u %u %u %u", f->file, &f->blkno, lsn,
                   &f->checksum, &f->flags, &f->lower, &f->upper, &f->special,
                   &f->prune_xid) != 9)
            continue;
        if (strstr(f->file, ".page") == NULL || pb_lsn_parse(lsn, &f->lsn) != 0)
            continue;
        if (load_page(dir, f) == 0)
            n_fixtures++;
        else
            fprintf(stderr, "fixture %s unreadable or not 8192 bytes\n", f->file);
    }
    fclose(fp);
}

static void test_fixtures_present(void)
{
    /* heap and index pages, block 0, blocks > 0 and one from segment 1. */
    PBT_CHECK(n_fixtures >= 6);
    bool seg1 = false;
    for (int i = 0; i < n_fixtures; i++)
        seg1 |= fixtures[i].blkno >= 131072;
    PBT_CHECK(seg1);
}

static void test_header_matches_pageinspect(void)
{
    for (int i = 0; i < n_fixtures; i++) {
        const fixture *f = &fixtures[i];
        page_header h;
        page_read_header(f->page, &h);
        PBT_CHECK(h.lsn == f->lsn);
        PBT_CHECK(h.checksum == f->checksum);
        PBT_CHECK(h.flags == f->flags);
        PBT_CHECK(h.lower == f->lower);
        PBT_CHECK(h.upper == f->upper);
        PBT_CHECK(h.special == f->special);
        PBT_CHECK(h.prune_xid == f->prune_xid);
        PBT_CHECK(h.pagesize_version == (8192 | 4)); /* BLCKSZ | PG_PAGE_LAYOUT_VERSION */
    }
}

static void test_checksum_matches_server(void)
{
    for (int i = 0; i < n_fixtures; i++) {
        const fixture *f = &fixtures[i];
        uint8_t before[PB_PAGE_SIZE];
        memcpy(before, f->page, sizeof(before));
        uint16_t sum = page_checksum(f->page, f->blkno);
        if (sum != f->checksum)
            fprintf(stderr, "  %s: computed %u, server wrote %u\n", f->file, sum, f->checksum);
        PBT_CHECK(sum == f->checksum);
        PBT_CHECK(memcmp(before, f->page, sizeof(before)) == 0); /* page left intact */
        /* The block number is mixed in: the same bytes at another block do not verify. */
        PBT_CHECK(page_checksum(f->page, f->blkno + 1) != f->checksum);
        PBT_CHECK(page_verify(f->page, f->blkno, true) == PAGE_OK);
        PBT_CHECK(page_verify(f->page, f->blkno ^ 1, true) == PAGE_BAD_CHECKSUM);
        PBT_CHECK(page_verify(f->page, f->blkno ^ 1, false) == PAGE_OK);
    }
}

static void test_segment_block_number(void)
{
    /* A page from segment 1 verifies with the relation block number, not the block
     * number inside its segment file. */
    for (int i = 0; i < n_fixtures; i++) {
        const fixture *f = &fixtures[i];
        if (f->blkno < 131072)
            continue;
        PBT_CHECK(page_verify(f->page, f->blkno, true) == PAGE_OK);
        PBT_CHECK(page_verify(f->page, f->blkno % 131072, true) == PAGE_BAD_CHECKSUM);
    }
}

static void test_unaligned_page(void)
{
    /* The scanner may hand pages at any address; the result must not depend on it. */
    static uint8_t buf[PB_PAGE_SIZE + 3];
    for (int i = 0; i < n_fixtures; i++) {
        memcpy(buf + 3, fixtures[i].page, PB_PAGE_SIZE);
        PBT_CHECK(page_checksum(buf + 3, fixtures[i].blkno) == fixtures[i].checksum);
    }
}

static void test_flipped_byte(void)
{
    static const size_t offsets[] = {0, 7, 8, 9, 23, 24, 4000, 8191};
    uint8_t page[PB_PAGE_SIZE];
    for (int i = 0; i < n_fixtures; i++) {
        for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++) {
            memcpy(page, fixtures[i].page, sizeof(page));
            page[offsets[k]] ^= 0x20;
            page_verdict v = page_verify(page, fixtures[i].blkno, true);
            if (v != PAGE_BAD_CHECKSUM)
                fprintf(stderr, "  %s offset %zu: verdict %d\n", fixtures[i].file,
                        offsets[k], (int)v);
            PBT_CHECK(v == PAGE_BAD_CHECKSUM);
            /* Without checksums the header is still sane. */
            PBT_CHECK(page_verify(page, fixtures[i].blkno, false) == PAGE_OK);
        }
    }
}

static void test_zero_page(void)
{
    uint8_t page[PB_PAGE_SIZE] = {0};
    PBT_CHECK(page_is_zero(page));
    PBT_CHECK(page_verify(page, 0, true) == PAGE_NEW);
    PBT_CHECK(page_verify(page, 12345, false) == PAGE_NEW);
    /* One stray byte anywhere makes it not new; an all-zero header is then impossible. */
    page[PB_PAGE_SIZE - 1] = 1;
    PBT_CHECK(!page_is_zero(page));
    PBT_CHECK(page_verify(page, 0, true) == PAGE_BAD_HEADER);
    page[PB_PAGE_SIZE - 1] = 0;
    page[0] = 1;
    PBT_CHECK(!page_is_zero(page));
    for (int i = 0; i < n_fixtures; i++)
        PBT_CHECK(!page_is_zero(fixtures[i].page));
}

static void set_u16(uint8_t *page, size_t off, uint16_t v) { pb_put_u16(page + off, v); }

static void test_bad_header(void)
{
    if (n_fixtures == 0)
        return;
    const fixture *f = &fixtures[0];
    uint8_t page[PB_PAGE_SIZE];
    page_header h;
    page_read_header(f->page, &h);

    struct {
        size_t off;
        uint16_t value;
    } cases[] = {
        {10, 0x0008},                          /* unknown flag bit */
        {12, 16},                              /* pd_lower inside the header */
        {12, (uint16_t)(h.upper + 8)},         /* pd_lower > pd_upper */
        {14, (uint16_t)(h.special + 8)},       /* pd_upper > pd_special */
        {16, 8200},                            /* pd_special past the page */
        {16, (uint16_t)(h.special - 4)},       /* pd_special not MAXALIGNed */
        {14, 0},                               /* pd_upper 0 ("new") but not all zero */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        memcpy(page, f->page, sizeof(page));
        set_u16(page, cases[k].off, cases[k].value);
        PBT_CHECK(page_verify(page, f->blkno, true) == PAGE_BAD_HEADER);
        PBT_CHECK(page_verify(page, f->blkno, false) == PAGE_BAD_HEADER);
    }
    /* The boundaries themselves are legal: lower == upper, upper == special == 8192. */
    memcpy(page, f->page, sizeof(page));
    set_u16(page, 12, 24);
    set_u16(page, 14, 8192);
    set_u16(page, 16, 8192);
    set_u16(page, 10, 0x0007);
    PBT_CHECK(page_verify(page, f->blkno, false) == PAGE_OK);
    set_u16(page, 8, page_checksum(page, f->blkno));
    PBT_CHECK(page_verify(page, f->blkno, true) == PAGE_OK);
}

static void test_checksum_never_zero(void)
{
    /* (x % 65535) + 1 keeps 0 free to mean "no checksum"; scan a few block numbers. */
    uint8_t page[PB_PAGE_SIZE] = {0};
    page[100] = 42;
    bool zero_seen = false, distinct = false;
    uint16_t first = page_checksum(page, 0);
    for (uint32_t b = 0; b < 70000; b++) {
        uint16_t c = page_checksum(page, b);
        zero_seen |= c == 0;
        distinct |= c != first;
    }
    PBT_CHECK(!zero_seen);
    PBT_CHECK(distinct);
}

/* xorshift64*: a fixed seed, so a failure repeats. */
static uint64_t rnd_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545F4914F6CDD1DULL;
}

/* The reference (tools/bench/checksum_ref.h) agrees with what the server wrote, so it
 * is a fair judge of the vectorized one. */
static void test_reference_matches_server(void)
{
    for (int i = 0; i < n_fixtures; i++)
        PBT_CHECK(checksum_ref(fixtures[i].page, fixtures[i].blkno) == fixtures[i].checksum);
}

/* Thousands of random pages at random block numbers and addresses (the scanner hands pages
 * at any offset of its buffers): page_checksum equals the word-by-word reference on every
 * one, whichever clone (AVX2 or the default) the machine runs. Some pages are random bytes,
 * some are mostly one repeated byte with random words (long runs exercise the same lanes
 * with the same input), some are fixture pages with random bytes changed. */
static void test_checksum_matches_reference(void)
{
    static uint8_t buf[PB_PAGE_SIZE + 64];
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    unsigned mismatches = 0, pages = 6000;
    for (unsigned n = 0; n < pages; n++) {
        uint8_t *page = buf + rnd_next(&state) % 64;
        unsigned kind = n % 3;
        if (kind == 0 || n_fixtures == 0) {
            for (size_t k = 0; k < PB_PAGE_SIZE; k += 8) {
                uint64_t v = rnd_next(&state);
                memcpy(page + k, &v, 8);
            }
        } else if (kind == 1) {
            memset(page, (int)(rnd_next(&state) & 0xff), PB_PAGE_SIZE);
            for (int k = 0; k < 16; k++)
                page[rnd_next(&state) % PB_PAGE_SIZE] = (uint8_t)rnd_next(&state);
        } else {
            memcpy(page, fixtures[n % n_fixtures].page, PB_PAGE_SIZE);
            page[rnd_next(&state) % PB_PAGE_SIZE] ^= (uint8_t)(1u << (n % 8));
        }
        /* Block numbers over the whole range, small ones (most relations) half the time. */
        uint32_t blkno = (uint32_t)rnd_next(&state);
        if (n % 2)
            blkno %= 262144;
        uint16_t got = page_checksum(page, blkno), want = checksum_ref(page, blkno);
        if (got != want && mismatches++ < 5)
            fprintf(stderr, "  random page %u blkno %u: %u, reference %u\n", n, blkno, got, want);
    }
    PBT_CHECK(mismatches == 0);
}

int main(void)
{
    load_fixtures();
    PBT_RUN(test_fixtures_present);
    PBT_RUN(test_header_matches_pageinspect);
    PBT_RUN(test_checksum_matches_server);
    PBT_RUN(test_segment_block_number);
    PBT_RUN(test_unaligned_page);
    PBT_RUN(test_flipped_byte);
    PBT_RUN(test_zero_page);
    PBT_RUN(test_bad_header);
    PBT_RUN(test_checksum_never_zero);
    PBT_RUN(test_reference_matches_server);
    PBT_RUN(test_checksum_matches_reference);
    return PBT_DONE();
}
