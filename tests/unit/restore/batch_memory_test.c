/*
 * tests/unit/restore/batch_memory_test.c — what a restore worker copies out of the chain's
 * merged manifests at once stays bounded by RS_BATCH_BYTES plus one file's records, whatever
 * the number of large files (memory bounds). Two manifests in memory (a full and an incremental
 * changing a few pages of every file) of NSEG segments of 131,072 pages each (1 GiB; the
 * full carries 1 MiB of page hashes per segment) and NSMALL small files between them, merged
 * as restore merges them; rs_recs_batch hands every file out once, in path order, and no
 * batch holds more than two segments' records. The old batch (closed at 4 MiB) held four.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/pbtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEG_PAGES 131072u
#define FRAME_PAGES 128u
#define NSEG 12u
#define NSMALL 40u
#define GRAB 32u /* restore/parallel.c FILES_PER_GRAB */

/* One relation record: pages [0, npages) shipped in runs of `per` pages every `step`. */
static void add_rel(mf_manifest *m, const char *path, uint32_t npages, uint32_t per,
                    uint32_t step)
{
    mf_file f = {0};
    f.path = strdup(path);
    f.kind = MF_REL;
    f.mode = 0600;
    f.size = (uint64_t)npages * PB_PAGE_SIZE;
    f.npages = npages;
    uint32_t nruns = (npages + step - 1) / step;
    f.runs = calloc(nruns, sizeof(*f.runs));
    f.page_hashes = calloc((size_t)nruns * per, sizeof(uint64_t));
    PBT_CHECK(f.path && f.runs && f.page_hashes);
    uint32_t h = 0;
    for (uint32_t p = 0; p < npages; p += step) {
        mf_run *r = &f.runs[f.nruns++];
        r->first = p;
        r->count = per < npages - p ? per : npages - p;
        r->pack_no = p / (32 * FRAME_PAGES);
        r->offset = PACK_HEADER_LEN + (uint64_t)f.nruns * 4096;
        r->clen = 4096;
        r->rlen = r->count * PB_PAGE_SIZE;
        for (uint32_t k = 0; k < r->count; k++, h++)
            f.page_hashes[h] = (uint64_t)p * 31 + k;
    }
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_add_file(m, &f, &err) == 0);
    mf_file_clear(&f);
}

/* Backup b of the chain: full (b 0) ships every page, the incremental one page in 4096. */
static mf_stream *backup(unsigned b)
{
    mf_backup hdr;
    memset(&hdr, 0, sizeof(hdr));
    snprintf(hdr.id, sizeof(hdr.id), "20261202-0000%02u%c", b, b ? 'I' : 'F');
    if (b)
        snprintf(hdr.parent, sizeof(hdr.parent), "20261202-000000F");
    hdr.type = b ? 'I' : 'F';
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_new(&m, &hdr, &err) == 0);
    char path[64];
    for (unsigned i = 0; i < NSEG; i++) {
        snprintf(path, sizeof(path), "base/5/16398%s%.0u", i ? "." : "", i);
        add_rel(m, path, SEG_PAGES, b ? 1 : FRAME_PAGES, b ? 4096 : FRAME_PAGES);
        snprintf(path, sizeof(path), "base/5/2%03u", i);
        for (unsigned k = 0; k < NSMALL / NSEG + 1; k++) {
            char small[80];
            snprintf(small, sizeof(small), "%s%c", path, 'a' + k);
            add_rel(m, small, 8, b ? 1 : 8, 8);
        }
    }
    mf_sort(m);
    mf_stream *s = NULL;
    PBT_CHECK(mf_stream_from_manifest(&s, m, &err) == 0);
    return s;
}

static void test_batch_bound(void)
{
    mf_stream *s[2] = {backup(0), backup(1)};
    mf_merge *mg = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_merge_open(&mg, s, 2, &err) == 0);
    rs_recs batch[GRAB];
    memset(batch, 0, sizeof(batch));
    /* one segment's records in both backups: what a batch may hold beyond RS_BATCH_BYTES */
    uint64_t seg = 2 * sizeof(mf_file) + (uint64_t)SEG_PAGES * 8 + SEG_PAGES / FRAME_PAGES *
                   sizeof(mf_run) + (SEG_PAGES / 4096) * (8 + sizeof(mf_run)) + 64;
    uint64_t most = 0, files = 0, segs = 0;
    char last[64] = "";
    bool end = false, ordered = true;
    while (!end) {
        size_t n = 0;
        uint64_t bytes = 0;
        PBT_CHECK(rs_recs_batch(mg, 2, batch, GRAB, RS_BATCH_BYTES, &n, &bytes, &end, &err) == 0);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            const mf_file *f = batch[i].ptr[1];
            ordered = ordered && strcmp(last, f->path) < 0 && batch[i].ptr[0];
            snprintf(last, sizeof(last), "%s", f->path);
            segs += f->npages == SEG_PAGES;
            sum += batch[i].bytes;
            rs_recs_clear(&batch[i]);
        }
        PBT_CHECK(sum == bytes);
        files += n;
        if (bytes > most)
            most = bytes;
    }
    PBT_CHECK(ordered);
    PBT_CHECK(files == NSEG * (1 + NSMALL / NSEG + 1) && segs == NSEG);
    PBT_CHECK(most <= RS_BATCH_BYTES + seg);
    PBT_CHECK(most < 2 * seg); /* the old 4 MiB batch: four segments per worker */
    printf("  %u segments of %u pages: a batch held at most %llu bytes (one segment's "
           "records: %llu)\n", NSEG, SEG_PAGES, (unsigned long long)most,
           (unsigned long long)seg);
    for (size_t i = 0; i < GRAB; i++)
        rs_recs_free(&batch[i]);
    mf_merge_close(mg);
}

int main(void)
{
    PBT_RUN(test_batch_bound);
    return PBT_DONE();
}
