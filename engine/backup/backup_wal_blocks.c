/*
 * engine/backup/backup_wal_blocks.c — the WAL-guided read of a relation segment (reading less,
 * docs/DESIGN.md "Rooms and arrows"): only the blocks the WAL window names, coalesced.
 */
#include "engine/backup/backup_rel_internal.h"

#include <stdlib.h>

/* Blocks closer than this share a request (1: only adjacent ones). Reading through a gap
 * of even a few pages cost 1.2x the changed pages on a pgbench index (its named blocks lie
 * 1 to 3 apart) for no measurable gain in time: only what WAL names is read. */
#define WG_GAP_PAGES 1u

static int add_pages(scan_range **r, size_t *cap, size_t *k, uint32_t first, uint32_t count)
{
    if (*k && (*r)[*k - 1].first + (*r)[*k - 1].count == first) {
        (*r)[*k - 1].count += count; /* extends the run */
        return 0;
    }
    if (PB_GROW(*r, cap, *k + 1))
        return PB_ENOMEM;
    (*r)[(*k)++] = (scan_range){first, count};
    return 0;
}

/* The runs of blocks[0..n) (sorted) below tail, then [tail, npages): the pages past the
 * parent's end are all read. */
static int named_ranges(const uint32_t *blocks, size_t n, uint32_t tail, uint32_t npages,
                        scan_range **out, size_t *nout)
{
    size_t cap = 0, k = 0;
    scan_range *r = NULL;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n && blocks[i] < tail; i++)
        if (!k || blocks[i] >= r[k - 1].first + r[k - 1].count) /* skip a duplicate */
            rc = add_pages(&r, &cap, &k, blocks[i], 1);
    if (rc == 0 && tail < npages)
        rc = add_pages(&r, &cap, &k, tail, npages - tail);
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    *nout = k;
    return 0;
}

int bk_read_named(rel_scan *s, const uint32_t *blocks, size_t n, uint64_t *size_out)
{
    uint64_t size = s->e->size;
    uint32_t npages = (uint32_t)((size + PB_PAGE_SIZE - 1) / PB_PAGE_SIZE);
    uint32_t tail = s->old.npages < npages ? s->old.npages : npages;
    scan_range *r = NULL;
    size_t nr = 0;
    if (named_ranges(blocks, n, tail, npages, &r, &nr))
        return pb_fail(s->err, PB_ENOMEM, "out of memory reading %s", s->e->path);
    scan_ranges_result res = {0, 0, 0};
    pb_error rerr = PB_ERROR_INIT;
    int rc = scan_ranges(s->ctx->scan, s->abspath, r, nr, WG_GAP_PAGES, bk_rel_chunk, s,
                         &res, &rerr);
    free(r);
    mf_header(s->ctx->m)->bytes_read += res.bytes;
    if (rc == PB_ENOENT)
        return rc; /* dropped since the walk */
    if (rc) {
        if (rerr.code == 0)
            return rc; /* the page callback failed and filled s->err */
        *s->err = rerr;
        return pb_error_wrap(s->err, "reading the WAL-named blocks of %s", s->e->path);
    }
    /* A segment truncated meanwhile ends where the read found its end; WAL replays the
     * truncation. One grown since the walk is recorded at the walk's size, as before. */
    *size_out = res.size < size ? res.size : size;
    return 0;
}

/* The blocks WAL names in e's segment: *guided false to read it whole (WAL cannot vouch
 * for it: not a main fork, marked by a create/truncate/database copy, or new). */
int bk_wal_blocks(rel_scan *s, uint32_t **blocks, size_t *n, bool *guided)
{
    bk_ctx *ctx = s->ctx;
    wg_key k;
    *guided = false;
    if (!ctx->wal || !s->has_old || s->untrusted)
        return 0;
    if (!wg_key_from_path(s->e->path, ctx->tblspc_dir, &k) || k.fork != 0) {
        ctx->wal_whole++; /* free space map, visibility map: not fully WAL-logged */
        return 0;
    }
    int rc = wg_set_blocks(ctx->wal, &k, blocks, n, s->err);
    if (rc == PB_ENOENT) {
        ctx->wal_whole++;
        return 0;
    }
    if (rc == 0)
        *guided = true;
    return rc;
}
