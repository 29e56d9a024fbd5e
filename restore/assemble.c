/*
 * restore/assemble.c — a window of a relation file rebuilt region by region in page
 * order, so that each region of the file is written with one call. Going backup by
 * backup instead writes every page an incremental supplies by itself and splits the
 * full's frames around them: a chain of 30 incrementals wrote 16 times as many spans as
 * its full alone, and the calls, not the bytes, were what cost (docs/BENCHMARKS.md,
 * "Chain restore CPU", 2026-12-02). Each backup keeps the frame it decoded last: an
 * incremental's frame holds scattered pages of up to 128 MiB of the file
 * (engine/backup/backup_internal.h), and the next regions need it again, so each frame is still
 * decoded once. That buffer is as long as the backup's largest frame and is freed once the
 * backup has no page left in the window (docs/DESIGN.md, "Memory"). Used on a local
 * repository only
 * (rb_assemble_window), for a window two backups or more supply.
 */
#include "restore/rebuild_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGION_PAGES (PACK_MAX_FRAME_RAW / PB_PAGE_SIZE) /* 128: 1 MiB, one write */
/* Frames a worker holds decoded at once, one per backup supplying the window (1 MiB
 * each at most): a chain with more backups than that in one window, or a restore
 * bounded by --max-memory (restore/parallel.c splits it without them), goes backup by
 * backup. */
#define ASSEMBLE_MAX_FRAMES 32u

/* One backup's part of the window: its needed runs in page order, the next one not
 * yet used up, and the frame it decoded last. */
typedef struct rb_cursor {
    uint32_t bidx;
    const mf_run **runs;
    size_t n, next;
    uint8_t *frame;
    uint32_t cap; /* frame's size: the longest frame this backup decoded yet */
    bool valid;
    uint32_t pack_no, len;
    uint64_t offset;
    uint32_t key_pack;
    char key[256];
} rb_cursor;

typedef struct assembly {
    rb_cursor *cur;
    size_t ncur;
    const mf_run **runs;
    uint8_t *out; /* the region being assembled */
    uint64_t held; /* bytes of the cursors' frames */
} assembly;

static int cmp_first(const void *a, const void *b)
{
    const mf_run *x = *(const mf_run *const *)a, *y = *(const mf_run *const *)b;
    return x->first < y->first ? -1 : x->first > y->first;
}

static void assembly_free(assembly *a)
{
    for (size_t i = 0; a->cur && i < a->ncur; i++)
        free(a->cur[i].frame);
    free(a->cur);
    free(a->runs);
    free(a->out);
}

/* The needed runs of every backup, one cursor per backup that has some. *fits false
 * when fewer than two or more backups supply the window than it may hold frames of. */
static int assembly_init(rs_ctx *ctx, const mf_file *const *recs, const rs_srcmap *map,
                         assembly *a, bool *fits, pb_error *err)
{
    const mf_file *f = recs[ctx->nchain - 1];
    size_t total = 0;
    for (size_t i = 0; i < ctx->nchain; i++)
        if (recs[i] && recs[i]->kind == MF_REL)
            total += recs[i]->nruns;
    memset(a, 0, sizeof(*a));
    a->runs = malloc(sizeof(*a->runs) * (total ? total : 1));
    a->cur = calloc(ctx->nchain, sizeof(*a->cur));
    a->out = rb_io_alloc(PACK_MAX_FRAME_RAW);
    if (!a->runs || !a->cur || !a->out)
        return pb_fail(err, PB_ENOMEM, "out of memory assembling %s", f->path);
    size_t used = 0;
    for (size_t i = 0; i < ctx->nchain; i++) {
        const mf_file *fi = recs[i];
        rb_cursor *c = &a->cur[a->ncur];
        c->runs = a->runs + used;
        for (uint32_t r = 0; fi && fi->kind == MF_REL && r < fi->nruns; r++)
            if (rs_srcmap_needs(map, &fi->runs[r], f, (uint32_t)i))
                c->runs[c->n++] = &fi->runs[r];
        if (c->n == 0)
            continue;
        c->bidx = (uint32_t)i;
        c->key_pack = UINT32_MAX;
        qsort(c->runs, c->n, sizeof(*c->runs), cmp_first);
        used += c->n;
        a->ncur++;
    }
    /* One backup alone writes each of its frames' spans straight from the frame. Written
     * past the page cache, a region's one write instead of a full's four 256 KiB frames
     * made a full restore about 10% faster, but the region buffer and the frame held
     * beside it took 1.25 MiB more per worker, and peak RSS grew by 11% from scale 100
     * to 1000, where every worker rebuilds a 1 GiB segment at once (docs/BENCHMARKS.md,
     * "A restore writes past the page cache"). */
    *fits = a->ncur >= 2 && a->ncur <= ASSEMBLE_MAX_FRAMES;
    return 0;
}

/* c's frame buffer at least len bytes: sized to the frames it really decodes, not to
 * PACK_MAX_FRAME_RAW. An incremental's frames are mostly far smaller, and 31 backups each
 * holding 1 MiB per worker was most of a chain restore's peak memory. */
static int cursor_reserve(rs_ctx *ctx, assembly *a, rb_cursor *c, uint32_t len,
                          const mf_file *f, pb_error *err)
{
    if (len <= c->cap)
        return 0;
    uint8_t *grown = realloc(c->frame, len ? len : 1);
    if (!grown)
        return pb_fail(err, PB_ENOMEM, "out of memory assembling %s", f->path);
    a->held += len - c->cap;
    c->frame = grown;
    c->cap = len;
    if (a->held > ctx->stats->frame_peak)
        ctx->stats->frame_peak = a->held;
    return 0;
}

/* c's runs are used up: no later region needs its frame, so the window does not hold it. */
static void cursor_release(assembly *a, rb_cursor *c)
{
    a->held -= c->cap;
    free(c->frame);
    c->frame = NULL;
    c->cap = 0;
    c->valid = false;
}

/* The frame of run in c->frame: decoded now unless it is the one decoded last. */
static int load_frame(rs_ctx *ctx, assembly *a, const mf_file *f, rb_cursor *c,
                      const mf_run *run, pb_error *err)
{
    const char *id = ctx->hdrs[c->bidx].id;
    if (c->key_pack != run->pack_no) {
        char dir[128];
        chain_backup_dir(dir, sizeof(dir), id);
        pack_key(c->key, sizeof(c->key), dir, run->pack_no);
        c->key_pack = run->pack_no;
    }
    if (!(c->valid && c->pack_no == run->pack_no && c->offset == run->offset)) {
        c->valid = false;
        if (pack_loc_check(c->key, run->offset, run->clen, run->rlen, err) != 0)
            return pb_error_wrap(err, "%s in backup %s", f->path, id);
        int rc = cursor_reserve(ctx, a, c, run->rlen, f, err);
        if (rc)
            return rc;
        const uint8_t *base = NULL;
        size_t got = 0;
        rc = rb_fetch_span(ctx, c->key, run->offset, run->clen, &base, err);
        char what[400];
        snprintf(what, sizeof(what), "%s frame at offset %llu", c->key,
                 (unsigned long long)run->offset);
        if (rc == 0)
            rc = pack_reader_decode(ctx->reader, base, run->clen, c->frame, c->cap, &got,
                                    what, err);
        if (rc)
            return rc;
        ctx->stats->frames_read++;
        c->valid = true;
        c->pack_no = run->pack_no;
        c->offset = run->offset;
        c->len = (uint32_t)got;
    }
    if (run->rlen != c->len)
        return pb_fail(err, PB_ECORRUPT, "%s frame at offset %llu holds %u bytes, expected %u",
                       c->key, (unsigned long long)run->offset, c->len, run->rlen);
    return rb_check_fit(ctx, f, c->key, c->bidx, run, c->len, err);
}

/* Backup c's pages of region [lo, hi), checked, into a->out; *filled counts them. */
static int fill_from(rs_ctx *ctx, const mf_file *f, const mf_file *fi, rb_cursor *c,
                     const rs_srcmap *map, assembly *a, uint32_t lo, uint32_t hi,
                     uint32_t *filled, pb_error *err)
{
    for (; c->next < c->n; c->next++) {
        const mf_run *run = c->runs[c->next];
        uint64_t end = (uint64_t)run->first + run->count;
        if (run->first >= hi)
            return 0;
        if (end > lo) {
            int rc = load_frame(ctx, a, f, c, run, err);
            if (rc)
                return rc;
            uint32_t from = run->first > lo ? run->first : lo;
            uint32_t to = end < hi ? (uint32_t)end : hi;
            for (uint32_t p = from; p < to; p++) {
                const rs_src *ps = rs_src_of(map, p, c->bidx);
                if (!ps)
                    continue;
                const uint8_t *page = c->frame + ((size_t)run->frame_page + (p - run->first)) *
                                                     PB_PAGE_SIZE;
                rc = rb_check_page(ctx, f, fi, run, c->bidx, p, ps, page, err);
                if (rc)
                    return rc;
                memcpy(a->out + (size_t)(p - lo) * PB_PAGE_SIZE, page, PB_PAGE_SIZE);
                (*filled)++;
            }
        }
        if (end > hi)
            return 0; /* the run goes on into the next region */
    }
    cursor_release(a, c);
    return 0;
}

/* Region [lo, hi): every page from its source, then one write. */
static int assemble_region(rs_ctx *ctx, int fd, const mf_file *const *recs, assembly *a,
                           const rs_srcmap *map, uint32_t lo, uint32_t hi, pb_error *err)
{
    const mf_file *f = recs[ctx->nchain - 1];
    uint32_t filled = 0;
    for (size_t i = 0; i < a->ncur; i++) {
        rb_cursor *c = &a->cur[i];
        int rc = fill_from(ctx, f, recs[c->bidx], c, map, a, lo, hi, &filled, err);
        if (rc)
            return rc;
    }
    /* the map gave every page a source, so each was copied once; anything else is a
     * record the map and the runs read differently, and nothing of it is written */
    if (filled != hi - lo)
        return pb_fail(err, PB_ECORRUPT, "%s blocks %u to %u: %u of %u pages found in the "
                       "chain of backup %s", f->path, lo, hi - 1, filled, hi - lo,
                       ctx->hdrs[ctx->nchain - 1].id);
    return rb_write_span(ctx, fd, f, (uint64_t)lo * PB_PAGE_SIZE, a->out,
                         (size_t)(hi - lo) * PB_PAGE_SIZE, err);
}

bool rb_assemble_window(rs_ctx *ctx, int fd, const mf_file *const *recs, const rs_srcmap *map,
                        int *rc, pb_error *err)
{
    /* On object storage every frame the cursors fetch out of pack order is a round
     * trip: a chain of 10 took 246 requests and 3.3 s on S3 assembled, against 88 and
     * 2.6 s backup by backup (docs/BENCHMARKS.md, commit 6a7c5ee). Locally those reads
     * cost next to nothing and the writes saved are what pays. */
    if (ctx->max_memory || !repo_is_local(ctx->repo))
        return false;
    assembly a;
    bool fits = false;
    *rc = assembly_init(ctx, recs, map, &a, &fits, err);
    if (*rc == 0 && !fits) {
        assembly_free(&a);
        return false;
    }
    for (uint32_t lo = map->w.first; *rc == 0 && lo < map->w.end; lo += REGION_PAGES) {
        uint32_t hi = map->w.end - lo < REGION_PAGES ? map->w.end : lo + REGION_PAGES;
        *rc = assemble_region(ctx, fd, recs, &a, map, lo, hi, err);
    }
    assembly_free(&a);
    return true;
}
