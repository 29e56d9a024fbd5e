/* tests/unit/restore/rebuild_fixtures.h — what the rebuild runners (shared_frame_test.c,
 * window_test.c, chain_decode_test.c) share: one file of a chain rebuilt into a sink. */
#ifndef PB_TEST_REBUILD_FIXTURES_H
#define PB_TEST_REBUILD_FIXTURES_H

#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <string.h>
#include <sys/stat.h>

typedef int (*pbt_sink_fn)(void *sink_ctx, const mf_file *f, uint64_t offset,
                           const uint8_t *data, size_t len, pb_error *err);

/* Rebuild the file whose records (one per backup of the chain hdrs[0..n)) are recs, handing
 * every verified page to sink with sink_ctx (sink NULL: verify only); *st receives the
 * counters. */
static inline int pbt_rebuild_one(repo *r, const mf_backup *hdrs, size_t n,
                                  const mf_file *const *recs, pbt_sink_fn sink, void *sink_ctx,
                                  rs_stats *st, pb_error *e)
{
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    memset(st, 0, sizeof(*st));
    ctx.repo = r;
    ctx.hdrs = hdrs;
    ctx.nchain = n;
    ctx.stats = st;
    ctx.sink = sink;
    ctx.sink_ctx = sink_ctx;
    int rc = rs_ctx_buffers(&ctx, e);
    if (rc == 0)
        rc = rs_rebuild_file(&ctx, recs, e);
    rs_ctx_free_buffers(&ctx);
    return rc;
}

/* A new posix repository at loc (made here): PB_EIO when loc exists or cannot be made. */
static inline int pbt_repo_new(repo **r, const char *loc, pb_error *e)
{
    repo_opts o = REPO_OPTS_INIT;
    o.location = loc;
    *r = NULL;
    if (mkdir(loc, 0700) != 0 || repo_open(r, &o, e) != 0)
        return PB_EIO;
    return 0;
}

/* A sink's span is whole pages inside a file of npages pages. */
static inline bool pbt_span_in(uint64_t off, size_t len, uint64_t npages)
{
    return off % PB_PAGE_SIZE == 0 && len % PB_PAGE_SIZE == 0 &&
           off / PB_PAGE_SIZE + len / PB_PAGE_SIZE <= npages;
}

/* What pbt_page_sink keeps of the pages a rebuild hands over, for a file of npages pages:
 * per page the hash of its last image and how often it came (where seen and times are
 * set, npages entries each), the pages themselves (where image is set, npages pages), the
 * pages and writes received, and whether each write began where the one before ended. */
typedef struct pbt_pages {
    uint64_t npages;
    uint64_t *seen;
    uint8_t *times;
    uint8_t *image;
    uint64_t pages_in;
    unsigned calls;
    uint64_t last_end;
    bool in_order;
} pbt_pages;

/* Forget what pg received, before the next rebuild. */
static inline void pbt_pages_reset(pbt_pages *pg)
{
    if (pg->seen)
        memset(pg->seen, 0, pg->npages * sizeof(*pg->seen));
    if (pg->times)
        memset(pg->times, 0, pg->npages);
    if (pg->image)
        memset(pg->image, 0, pg->npages * PB_PAGE_SIZE);
    pg->pages_in = 0;
    pg->calls = 0;
    pg->last_end = 0;
    pg->in_order = true;
}

/* A sink (pbt_sink_fn) whose sink_ctx is a pbt_pages; a span that is not whole pages
 * inside the file is refused. */
static inline int pbt_page_sink(void *ctx, const mf_file *f, uint64_t off, const uint8_t *data,
                                size_t len, pb_error *err)
{
    pbt_pages *pg = ctx;
    (void)f;
    (void)err;
    if (!pbt_span_in(off, len, pg->npages))
        return PB_EINVAL;
    pg->calls++;
    pg->in_order = pg->in_order && off == pg->last_end;
    pg->last_end = off + len;
    pg->pages_in += len / PB_PAGE_SIZE;
    if (pg->image)
        memcpy(pg->image + off, data, len);
    for (size_t k = 0; k < len / PB_PAGE_SIZE; k++) {
        size_t p = off / PB_PAGE_SIZE + k;
        if (pg->seen)
            pg->seen[p] = pb_hash64(data + k * PB_PAGE_SIZE, PB_PAGE_SIZE);
        if (pg->times)
            pg->times[p]++;
    }
    return 0;
}

#endif
