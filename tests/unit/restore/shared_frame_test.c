/*
 * tests/unit/restore/shared_frame_test.c — runs sharing one frame (mf_run.frame_page):
 * a chain held in memory (a full and an incremental whose changed pages of one region
 * are one frame) rebuilds the newest content through rs_rebuild_file, decoding the
 * shared frame once; a run whose frame_page + count passes the frame's pages is
 * refused as corruption naming the file and the pack, before anything is written.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/restore/rebuild_fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPAGES 13u
#define FULL "20260101-000000F"
#define INCR "20260101-000100I"

static char root[256];
static uint8_t image[NPAGES][PB_PAGE_SIZE]; /* what the sink received */

static pbt_pages sunk = {.npages = NPAGES, .image = &image[0][0]};

static mf_manifest *backup(const char *id, const char *parent, char type)
{
    mf_backup h = pbt_header(id, parent, type);
    return pbt_manifest_new(&h);
}

/* A relation of NPAGES pages whose runs are given; frame is the one stored frame. */
static mf_manifest *rel_backup(repo *r, const char *id, const char *parent, char type,
                               const uint8_t *frame, uint32_t frame_pages, const mf_run *runs,
                               uint32_t nruns)
{
    pb_error e = PB_ERROR_INIT;
    char dir[128];
    chain_backup_dir(dir, sizeof(dir), id);
    pack_writer *w = NULL;
    pack_loc loc;
    PBT_CHECK(pack_writer_open(&w, r, dir, 1u << 20, 1, &e) == 0);
    PBT_CHECK(pack_write_frame(w, frame, (size_t)frame_pages * PB_PAGE_SIZE, &loc, &e) == 0);
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    mf_manifest *m = backup(id, parent, type);
    mf_file f = pbt_rel_file("base/1/100", NPAGES);
    f.nruns = nruns;
    f.runs = calloc(nruns, sizeof(mf_run));
    f.page_hashes = calloc(frame_pages, sizeof(uint64_t));
    uint32_t h = 0;
    for (uint32_t i = 0; i < nruns; i++) {
        f.runs[i] = runs[i];
        f.runs[i].pack_no = loc.pack_no;
        f.runs[i].offset = loc.offset;
        f.runs[i].clen = loc.clen;
        f.runs[i].rlen = loc.rlen;
        for (uint32_t k = 0; k < runs[i].count && h < frame_pages; k++, h++) {
            size_t at = (size_t)(runs[i].frame_page + k) % frame_pages;
            f.page_hashes[h] = pb_hash64(frame + at * PB_PAGE_SIZE, PB_PAGE_SIZE);
        }
    }
    PBT_CHECK(mf_add_file(m, &f, &e) == 0);
    mf_sort(m);
    return m;
}

/* Restore base/1/100 from full + incremental; the incremental's second run starts at
 * page second_at of the shared frame (2 is right). */
static int rebuild(uint32_t second_at, rs_stats *st, pb_error *e)
{
    char loc[300];
    snprintf(loc, sizeof(loc), "%s/repo-%u", root, second_at);
    repo *r;
    if (pbt_repo_new(&r, loc, e) != 0)
        return PB_EIO;
    static uint8_t full[NPAGES][PB_PAGE_SIZE], changed[5][PB_PAGE_SIZE];
    for (uint32_t p = 0; p < NPAGES; p++)
        pbt_fill_page(full[p], (int)p);
    for (int k = 0; k < 5; k++)
        pbt_fill_page(changed[k], 100 + k);
    mf_run frun = {0, NPAGES, 0, 0, 0, 0, 0};
    /* pages 1-2 and 10-12 changed: one frame of 5 pages, two runs */
    mf_run irun[2] = {{1, 2, 0, 0, 0, 0, 0}, {10, 3, 0, 0, 0, 0, second_at}};
    mf_manifest *items[2] = {
        rel_backup(r, FULL, "", 'F', full[0], NPAGES, &frun, 1),
        rel_backup(r, INCR, FULL, 'I', changed[0], 5, irun, 2)};
    mf_backup hdrs[2] = {*mf_header(items[0]), *mf_header(items[1])};
    const mf_file *recs[2] = {mf_find(items[0], "base/1/100"), mf_find(items[1], "base/1/100")};
    pbt_pages_reset(&sunk);
    int rc = pbt_rebuild_one(r, hdrs, 2, recs, pbt_page_sink, &sunk, st, e);
    if (rc == 0) {
        for (uint32_t p = 0; p < NPAGES; p++) {
            const uint8_t *want = p == 1 || p == 2 ? changed[p - 1]
                                  : p >= 10        ? changed[p - 10 + 2]
                                                   : full[p];
            PBT_CHECK(memcmp(image[p], want, PB_PAGE_SIZE) == 0);
        }
    }
    mf_free(items[0]);
    mf_free(items[1]);
    repo_free(r);
    return rc;
}

static void test_round_trip(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild(2, &st, &e) == 0);
    PBT_CHECK(sunk.pages_in == NPAGES);
    PBT_CHECK(st.frames_read == 2); /* the shared frame is decoded once */
}

static void test_run_past_frame(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    /* pages 3..5 of a 5-page frame: past its end */
    PBT_CHECK(rebuild(3, &st, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "base/1/100") != NULL);
    PBT_CHECK(strstr(e.msg, "backup/" INCR "/pack/000001") != NULL);
    /* none of the refused run's pages (a region of pages is written whole or not at
     * all: restore/assemble.c) */
    static const uint8_t zero[PB_PAGE_SIZE];
    PBT_CHECK(sunk.pages_in <= NPAGES - 3);
    for (uint32_t p = 10; p < 13; p++)
        PBT_CHECK(memcmp(image[p], zero, PB_PAGE_SIZE) == 0);
    fprintf(stderr, "refused as expected: %s\n", e.msg);
    /* a frame_page so large that frame_page + count wraps 32 bits */
    PBT_CHECK(rebuild(UINT32_MAX - 1, &st, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "base/1/100") != NULL && strstr(e.msg, "pack/000001") != NULL);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_round_trip), PBT_CASE(test_run_past_frame)};
    return pbt_main_in_tmpdir(root, sizeof(root), "shared-frame-test", cases, PBT_COUNT(cases));
}
