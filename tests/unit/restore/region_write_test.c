/*
 * tests/unit/restore/region_write_test.c — a relation file of a full and several
 * incrementals whose changed pages are scattered over the whole file, each incremental's
 * pages in two shared frames (as engine/backup/backup_file.c writes them): restore/assemble.c
 * hands every 1 MiB region to its writer once, in page order, with the newest content of
 * every page, and decodes each frame once; a page failing its hash is named with its
 * block and backup, and nothing of its region is written.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/restore/rebuild_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPAGES 1000u /* 7 regions of 128 pages and a short one */
#define REGION 128u
#define FULL_FRAME 32u /* BK_FRAME_PAGES */
#define NINCR 6
#define STRIDE 29u

static const char *ids[NINCR + 1] = {"20260101-000000F", "20260101-000100I", "20260101-000200I",
                                     "20260101-000300I", "20260101-000400I", "20260101-000500I",
                                     "20260101-000600I"};
static char root[256];
static uint64_t seen[NPAGES]; /* hash of what the writer received, per page */
static uint8_t times[NPAGES];  /* how often each page was received */

static pbt_pages sunk = {.npages = NPAGES, .seen = seen, .times = times};

/* Page p's content in backup b (0: the full). */
static void content(uint8_t *page, int b, uint32_t p)
{
    pbt_fill_page(page, b * 100000 + (int)p);
}

/* Whether incremental b (1..NINCR) changed page p: every STRIDE-th page from 3b. */
static bool changed_in(int b, uint32_t p)
{
    return b > 0 && p >= (uint32_t)(3 * b) && (p - (uint32_t)(3 * b)) % STRIDE == 0;
}

/* The n pages listed, one run each, in one frame of w (the record's hashes come later). */
static void ship_frame(pack_writer *w, mf_file *f, int b, const uint32_t *pages, uint32_t n)
{
    pb_error e = PB_ERROR_INIT;
    uint8_t *buf = malloc((size_t)n * PB_PAGE_SIZE);
    PBT_CHECK(buf != NULL);
    for (uint32_t k = 0; k < n; k++)
        content(buf + (size_t)k * PB_PAGE_SIZE, b, pages[k]);
    pack_loc loc;
    PBT_CHECK(pack_write_frame(w, buf, (size_t)n * PB_PAGE_SIZE, &loc, &e) == 0);
    for (uint32_t k = 0; k < n; k++)
        f->runs[f->nruns++] = (mf_run){pages[k], 1, loc.pack_no, loc.clen, loc.offset,
                                       loc.rlen, k};
    free(buf);
}

/* Backup b of the chain: the full's frames of FULL_FRAME pages, or incremental b's
 * changed pages in two frames. bad_block: that block's recorded hash is wrong. */
static mf_manifest *backup(repo *r, int b, uint32_t bad_block)
{
    pb_error e = PB_ERROR_INIT;
    char dir[128];
    chain_backup_dir(dir, sizeof(dir), ids[b]);
    pack_writer *w = NULL;
    PBT_CHECK(pack_writer_open(&w, r, dir, 64u << 20, 1, &e) == 0);
    mf_backup h = pbt_header(ids[b], b ? ids[b - 1] : "", b ? 'I' : 'F');
    mf_manifest *m = pbt_manifest_new(&h);
    mf_file f = pbt_rel_file("base/1/100", NPAGES);
    f.runs = calloc(NPAGES, sizeof(mf_run));
    f.page_hashes = calloc(NPAGES, sizeof(uint64_t));
    uint32_t *pages = calloc(NPAGES, sizeof(uint32_t)), n = 0;
    PBT_CHECK(f.runs && f.page_hashes && pages);
    for (uint32_t p = 0; p < NPAGES; p++)
        if (b == 0 || changed_in(b, p))
            pages[n++] = p;
    if (b == 0) {
        for (uint32_t i = 0; i < n; i += FULL_FRAME) {
            uint32_t cnt = n - i < FULL_FRAME ? n - i : FULL_FRAME;
            uint32_t before = f.nruns;
            ship_frame(w, &f, 0, pages + i, cnt);
            /* one run of the frame's pages (bulk data) */
            f.runs[before].count = cnt;
            f.nruns = before + 1;
        }
    } else {
        ship_frame(w, &f, b, pages, n / 2);
        ship_frame(w, &f, b, pages + n / 2, n - n / 2);
    }
    /* the record's hashes, in run order */
    uint32_t hi = 0;
    uint8_t page[PB_PAGE_SIZE];
    for (uint32_t i = 0; i < f.nruns; i++)
        for (uint32_t k = 0; k < f.runs[i].count; k++, hi++) {
            content(page, b, f.runs[i].first + k);
            f.page_hashes[hi] = pb_hash64(page, PB_PAGE_SIZE) ^
                                (f.runs[i].first + k == bad_block ? 1u : 0u);
        }
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    free(pages);
    PBT_CHECK(mf_add_file(m, &f, &e) == 0);
    mf_sort(m);
    return m;
}

/* The chain's backups in repository r: their manifests, headers and records of the file. */
typedef struct test_chain {
    mf_manifest *items[NINCR + 1];
    mf_backup hdrs[NINCR + 1];
    const mf_file *recs[NINCR + 1];
} test_chain;

static void test_chain_make(test_chain *c, repo *r, int bad_in, uint32_t bad_block)
{
    for (int b = 0; b <= NINCR; b++) {
        c->items[b] = backup(r, b, b == bad_in ? bad_block : UINT32_MAX);
        c->hdrs[b] = *mf_header(c->items[b]);
        c->recs[b] = mf_find(c->items[b], "base/1/100");
    }
}

static void test_chain_free(test_chain *c)
{
    for (int b = 0; b <= NINCR; b++)
        mf_free(c->items[b]);
}

/* Rebuild the chain's file into the sink; bad_in/bad_block: a page whose recorded hash
 * is wrong in that backup (bad_in < 0: none). */
static int rebuild(const char *name, int bad_in, uint32_t bad_block, rs_stats *st, pb_error *e)
{
    repo *r = pbt_repo_open_in(root, name);
    if (!r)
        return PB_EIO;
    test_chain c;
    test_chain_make(&c, r, bad_in, bad_block);
    pbt_pages_reset(&sunk);
    int rc = pbt_rebuild_one(r, c.hdrs, NINCR + 1, c.recs, pbt_page_sink, &sunk, st, e);
    bool right = true;
    uint8_t want[PB_PAGE_SIZE];
    for (uint32_t p = 0; rc == 0 && p < NPAGES; p++) {
        int b = NINCR;
        while (b > 0 && !changed_in(b, p))
            b--;
        content(want, b, p);
        right = right && times[p] == 1 && seen[p] == pb_hash64(want, PB_PAGE_SIZE);
    }
    PBT_CHECK(right);
    test_chain_free(&c);
    repo_free(r);
    return rc;
}

static void test_one_write_per_region(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild("chain", -1, 0, &st, &e) == 0);
    /* backup by backup, each scattered page was a write of its own (about 200 here) */
    PBT_CHECK(sunk.calls == (NPAGES + REGION - 1) / REGION);
    PBT_CHECK(sunk.in_order);
    /* each frame decoded once: the full's, and two of each incremental */
    PBT_CHECK(st.frames_read <= (NPAGES + FULL_FRAME - 1) / FULL_FRAME + 2 * NINCR);
    fprintf(stderr, "%u writes, %llu frames decoded\n", sunk.calls,
            (unsigned long long)st.frames_read);
}

static void test_bad_page_named(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    /* block 6 + 29 = 35 of incremental 2 is still its newest copy (no later one
     * changes it): its recorded hash is wrong */
    PBT_CHECK(rebuild("bad", 2, 35, &st, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "base/1/100 block 35 from backup 20260101-000200I") != NULL);
    PBT_CHECK(strstr(e.msg, "fails its hash check") != NULL);
    for (uint32_t p = 0; p < REGION; p++)
        PBT_CHECK(times[p] == 0); /* nothing of its region reached the writer */
    fprintf(stderr, "refused as expected: %s\n", e.msg);
}

/* The decoded frames a window holds are sized to the frames themselves: the full's
 * frame and each incremental's larger frame, not PACK_MAX_FRAME_RAW per backup (7 MiB
 * for this chain of 7). */
static void test_frames_sized(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild("sized", -1, 0, &st, &e) == 0);
    uint64_t bound = (uint64_t)FULL_FRAME * PB_PAGE_SIZE;
    for (int b = 1; b <= NINCR; b++) {
        uint32_t n = 0;
        for (uint32_t p = 0; p < NPAGES; p++)
            n += changed_in(b, p);
        bound += (uint64_t)(n - n / 2) * PB_PAGE_SIZE; /* its larger frame */
    }
    PBT_CHECK(st.frame_peak > 0);
    PBT_CHECK(st.frame_peak <= bound);
    if (st.frame_peak > bound)
        fprintf(stderr, "frames held %llu bytes, bound %llu\n",
                (unsigned long long)st.frame_peak, (unsigned long long)bound);
}

/* The newest content of every page, read back from the file written at path. */
static bool file_right(const char *path)
{
    FILE *fp = fopen(path, "rb");
    uint8_t got[PB_PAGE_SIZE], want[PB_PAGE_SIZE];
    bool right = fp != NULL;
    for (uint32_t p = 0; right && p < NPAGES; p++) {
        int b = NINCR;
        while (b > 0 && !changed_in(b, p))
            b--;
        content(want, b, p);
        right = fread(got, 1, PB_PAGE_SIZE, fp) == PB_PAGE_SIZE &&
                memcmp(got, want, PB_PAGE_SIZE) == 0;
    }
    right = right && fgetc(fp) == EOF;
    if (fp)
        fclose(fp);
    return right;
}

/* The chain's file written into a target directory, assembled (the default on a local
 * repository) or backup by backup (--max-memory): past the page cache when assembled;
 * backup by backup the incrementals' scattered pages would each be a direct write
 * waiting for the device, so that file goes on buffered (restore/write_target.c). */
static void target_write(const char *name, uint64_t max_memory, bool direct_after)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/target-%s", root, name);
    PBT_CHECK(mkdir(dir, 0700) == 0);
    char base[320];
    snprintf(base, sizeof(base), "%s/base", dir);
    PBT_CHECK(mkdir(base, 0700) == 0);
    snprintf(base, sizeof(base), "%s/base/1", dir);
    PBT_CHECK(mkdir(base, 0700) == 0);
    repo *r = pbt_repo_open_in(root, name);
    PBT_CHECK(r != NULL);
    test_chain c;
    test_chain_make(&c, r, -1, UINT32_MAX);
    pb_error e = PB_ERROR_INIT;
    rs_stats st;
    memset(&st, 0, sizeof(st));
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.repo = r;
    ctx.hdrs = c.hdrs;
    ctx.nchain = NINCR + 1;
    ctx.stats = &st;
    ctx.target_dir = dir;
    ctx.max_memory = max_memory;
    rs_target *t = NULL;
    PBT_CHECK(rs_target_open(&t, dir, true, &e) == 0);
    ctx.target = t;
    PBT_CHECK(rs_ctx_buffers(&ctx, &e) == 0);
    PBT_CHECK(rs_rebuild_file(&ctx, c.recs, &e) == 0);
    rs_ctx_free_buffers(&ctx);
    rs_target_free(t);
    char file[340];
    snprintf(file, sizeof(file), "%s/base/1/100", dir);
    PBT_CHECK(file_right(file));
    PBT_CHECK(st.files_written == 1 && st.pages_written == NPAGES);
    /* where the filesystem refuses O_DIRECT nothing is direct (write_target_test) */
    if (st.files_direct == 1)
        PBT_CHECK(st.direct_fallbacks == (direct_after ? 0u : 1u));
    test_chain_free(&c);
    repo_free(r);
}

static void test_target_assembled_direct(void)
{
    target_write("assembled", 0, true);
}

static void test_target_by_backup_buffered(void)
{
    target_write("by-backup", 64u << 20, false);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_one_write_per_region),
                                     PBT_CASE(test_bad_page_named), PBT_CASE(test_frames_sized),
                                     PBT_CASE(test_target_assembled_direct),
                                     PBT_CASE(test_target_by_backup_buffered)};
    return pbt_main_in_tmpdir(root, sizeof(root), "region-write-test", cases, PBT_COUNT(cases));
}
