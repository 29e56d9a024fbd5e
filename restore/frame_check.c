/*
 * restore/frame_check.c — what the rebuild's two ways through a window (backup by backup
 * in rebuild.c, region by region in assemble.c) share: stored bytes fetched through the
 * context's pack source, a decoded frame that must hold the pages its run takes, and
 * each page checked against its recorded hash before it is written (docs/DESIGN.md,
 * rule 8).
 */
#include "restore/rebuild_internal.h"

int rb_fetch_span(rs_ctx *ctx, const char *key, uint64_t start, size_t span,
                  const uint8_t **out, pb_error *err)
{
    uint64_t before = pack_source_fetched(ctx->source);
    int rc = pack_source_fetch(ctx->source, key, start, span, out, err);
    ctx->stats->bytes_fetched += pack_source_fetched(ctx->source) - before;
    return rc;
}


int rb_check_fit(const rs_ctx *ctx, const mf_file *f, const char *key, uint32_t bidx,
                 const mf_run *run, size_t got, pb_error *err)
{
    if (got % PB_PAGE_SIZE == 0 &&
        ((uint64_t)run->frame_page + run->count) * PB_PAGE_SIZE <= got)
        return 0;
    return pb_fail(err, PB_ECORRUPT,
                   "%s in backup %s: run of %u pages from page %u of the frame at offset %llu "
                   "of %s, which holds %zu bytes (%zu pages)",
                   f->path, ctx->hdrs[bidx].id, run->count,
                   run->frame_page, (unsigned long long)run->offset, key, got,
                   got / PB_PAGE_SIZE);
}


int rb_check_page(const rs_ctx *ctx, const mf_file *f, const mf_file *fi, const mf_run *run,
                  uint32_t bidx, uint32_t p, const rs_src *ps, const uint8_t *page,
                  pb_error *err)
{
    if (pb_hash64(page, PB_PAGE_SIZE) == fi->page_hashes[ps->hash_index])
        return 0;
    return pb_fail(err, PB_ECORRUPT,
                   "%s block %u from backup %s (pack %u, frame at %llu) fails its hash check",
                   f->path, p, ctx->hdrs[bidx].id, run->pack_no,
                   (unsigned long long)run->offset);
}
