/*
 * tests/unit/restore/window_test.c — a relation file longer than one source-map window
 * (restore/rebuild.c maps and rebuilds MAP_WINDOW pages at a time, so a worker holds the
 * map of one window, not of a whole 1 GiB segment) rebuilds page for page: the full's
 * frames cross the windows' ends, and one frame of the incremental holds pages on both
 * sides of the first end and the last page of the file. Every page reaches the sink once,
 * with the newest content; a page missing from the chain is named with its window.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/restore/rebuild_fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WINDOW 32768u /* restore/rebuild.c MAP_WINDOW */
#define NPAGES (2 * WINDOW + 5)
#define FP 96u /* pages of one frame of the full: 32768 is no multiple of it */
#define FULL "20260101-000000F"
#define INCR "20260101-000100I"

static char root[256];
static uint64_t *seen;     /* hash of what the sink received, per page */
static uint8_t *times;     /* how often each page was received */

static pbt_pages sunk = {.npages = NPAGES};

/* The full: pages p hold pbt_fill_page(p % FP), frames of FP pages. Without the last
 * frame when drop_last (a page with no source). */
static mf_manifest *full_backup(repo *r, const uint8_t *frame, bool drop_last)
{
    pb_error e = PB_ERROR_INIT;
    char dir[128];
    chain_backup_dir(dir, sizeof(dir), FULL);
    pack_writer *w = NULL;
    PBT_CHECK(pack_writer_open(&w, r, dir, 64u << 20, 1, &e) == 0);
    mf_backup h = pbt_header(FULL, "", 'F');
    mf_manifest *m = pbt_manifest_new(&h);
    mf_file f = pbt_rel_file("base/1/100", NPAGES);
    uint32_t nframes = (NPAGES + FP - 1) / FP - (drop_last ? 1 : 0);
    f.runs = calloc(nframes, sizeof(mf_run));
    f.page_hashes = calloc(NPAGES, sizeof(uint64_t));
    PBT_CHECK(f.runs && f.page_hashes);
    uint32_t hi = 0;
    for (uint32_t i = 0; i < nframes; i++) {
        uint32_t first = i * FP, count = NPAGES - first < FP ? NPAGES - first : FP;
        pack_loc loc;
        PBT_CHECK(pack_write_frame(w, frame, (size_t)count * PB_PAGE_SIZE, &loc, &e) == 0);
        f.runs[f.nruns++] = (mf_run){first, count, loc.pack_no, loc.clen, loc.offset,
                                     loc.rlen, 0};
        for (uint32_t k = 0; k < count; k++)
            f.page_hashes[hi++] = pb_hash64(frame + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE);
    }
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    PBT_CHECK(mf_add_file(m, &f, &e) == 0);
    mf_sort(m);
    return m;
}

/* The incremental: one frame of 3 pages: pages WINDOW - 1 and WINDOW (a run across the
 * first window's end), then the file's last page (a run sharing that frame). */
static mf_manifest *incr_backup(repo *r, const uint8_t *changed)
{
    pb_error e = PB_ERROR_INIT;
    char dir[128];
    chain_backup_dir(dir, sizeof(dir), INCR);
    pack_writer *w = NULL;
    pack_loc loc;
    PBT_CHECK(pack_writer_open(&w, r, dir, 1u << 20, 1, &e) == 0);
    PBT_CHECK(pack_write_frame(w, changed, 3 * PB_PAGE_SIZE, &loc, &e) == 0);
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    mf_backup h = pbt_header(INCR, FULL, 'I');
    mf_manifest *m = pbt_manifest_new(&h);
    mf_file f = pbt_rel_file("base/1/100", NPAGES);
    f.runs = calloc(2, sizeof(mf_run));
    f.page_hashes = calloc(3, sizeof(uint64_t));
    PBT_CHECK(f.runs && f.page_hashes);
    f.nruns = 2;
    f.runs[0] = (mf_run){WINDOW - 1, 2, loc.pack_no, loc.clen, loc.offset, loc.rlen, 0};
    f.runs[1] = (mf_run){NPAGES - 1, 1, loc.pack_no, loc.clen, loc.offset, loc.rlen, 2};
    for (int k = 0; k < 3; k++)
        f.page_hashes[k] = pb_hash64(changed + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE);
    PBT_CHECK(mf_add_file(m, &f, &e) == 0);
    mf_sort(m);
    return m;
}

static int rebuild(const char *name, bool drop_last, rs_stats *st, pb_error *e)
{
    char loc[300];
    snprintf(loc, sizeof(loc), "%s/%s", root, name);
    repo *r;
    if (pbt_repo_new(&r, loc, e) != 0)
        return PB_EIO;
    uint8_t *frame = malloc((size_t)FP * PB_PAGE_SIZE), changed[3][PB_PAGE_SIZE];
    PBT_CHECK(frame != NULL);
    for (uint32_t k = 0; k < FP; k++)
        pbt_fill_page(frame + (size_t)k * PB_PAGE_SIZE, (int)k);
    for (int k = 0; k < 3; k++)
        pbt_fill_page(changed[k], 1000 + k);
    mf_manifest *items[2] = {full_backup(r, frame, drop_last), incr_backup(r, changed[0])};
    mf_backup hdrs[2] = {*mf_header(items[0]), *mf_header(items[1])};
    const mf_file *recs[2] = {mf_find(items[0], "base/1/100"), mf_find(items[1], "base/1/100")};
    pbt_pages_reset(&sunk);
    int rc = pbt_rebuild_one(r, hdrs, 2, recs, pbt_page_sink, &sunk, st, e);
    bool right = true;
    for (uint32_t p = 0; rc == 0 && p < NPAGES; p++) {
        const uint8_t *want = p == WINDOW - 1 ? changed[0]
                              : p == WINDOW   ? changed[1]
                              : p == NPAGES - 1 ? changed[2]
                                                : frame + (size_t)(p % FP) * PB_PAGE_SIZE;
        right = right && times[p] == 1 && seen[p] == pb_hash64(want, PB_PAGE_SIZE);
    }
    PBT_CHECK(right);
    mf_free(items[0]);
    mf_free(items[1]);
    repo_free(r);
    free(frame);
    return rc;
}

static void test_windows(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild("whole", false, &st, &e) == 0);
    /* every frame of the full once, or twice where it crosses a window's end; the
     * incremental's frame once per window it serves */
    uint32_t nframes = (NPAGES + FP - 1) / FP;
    PBT_CHECK(st.frames_read >= nframes + 1 && st.frames_read <= nframes + 2 + 3);
    PBT_CHECK(st.pages_written == 0); /* a sink takes them, nothing is written */
}

static void test_missing_in_last_window(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    /* the full's last frame (pages 65472..65540) is gone; the incremental has 65540 */
    PBT_CHECK(rebuild("missing", true, &st, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "base/1/100 block 65472 has no source") != NULL);
    PBT_CHECK(strstr(e.msg, "from blocks 65536 to 65540") == NULL); /* 65472 is window 1 */
    PBT_CHECK(strstr(e.msg, "from blocks 32768 to 65535") != NULL);
    fprintf(stderr, "refused as expected: %s\n", e.msg);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "window-test") != 0)
        return 1;
    seen = calloc(NPAGES, sizeof(*seen));
    times = calloc(NPAGES, 1);
    if (!seen || !times)
        return 1;
    sunk.seen = seen;
    sunk.times = times;
    PBT_RUN(test_windows);
    PBT_RUN(test_missing_in_last_window);
    free(seen);
    free(times);
    pbt_rmtree(root);
    return PBT_DONE();
}
