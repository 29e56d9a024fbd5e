/* tests/unit/restore/rebuild_fixtures.h — what the rebuild runners (shared_frame_test.c,
 * window_test.c, chain_decode_test.c) share: one file of a chain rebuilt into a sink. */
#ifndef PB_TEST_REBUILD_FIXTURES_H
#define PB_TEST_REBUILD_FIXTURES_H

#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <string.h>

typedef int (*pbt_sink_fn)(void *sink_ctx, const mf_file *f, uint64_t offset,
                           const uint8_t *data, size_t len, pb_error *err);

/* Rebuild the file whose records (one per backup of the chain hdrs[0..n)) are recs, handing
 * every verified page to sink (NULL: verify only); *st receives the counters. */
static inline int pbt_rebuild_one(repo *r, const mf_backup *hdrs, size_t n,
                                  const mf_file *const *recs, pbt_sink_fn sink, rs_stats *st,
                                  pb_error *e)
{
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    memset(st, 0, sizeof(*st));
    ctx.repo = r;
    ctx.hdrs = hdrs;
    ctx.nchain = n;
    ctx.stats = st;
    ctx.sink = sink;
    int rc = rs_ctx_buffers(&ctx, e);
    if (rc == 0)
        rc = rs_rebuild_file(&ctx, recs, e);
    rs_ctx_free_buffers(&ctx);
    return rc;
}

/* A sink's span is whole pages inside a file of npages pages. */
static inline bool pbt_span_in(uint64_t off, size_t len, uint64_t npages)
{
    return off % PB_PAGE_SIZE == 0 && len % PB_PAGE_SIZE == 0 &&
           off / PB_PAGE_SIZE + len / PB_PAGE_SIZE <= npages;
}

#endif
