/*
 * engine/backup_named.c — the WAL-guided read of a relation segment (issue 11,
 * docs/DESIGN.md "Rooms and arrows"): only the blocks the WAL window names, coalesced.
 */
#include "engine/backup_rel_internal.h"

#include <stdlib.h>
#include <sys/stat.h>

#define WG_GAP_PAGES 4u   /* read through gaps this small: one request beats two */
#define WG_RUN_PAGES 128u /* at most 1 MiB per request */

/* Read [first, end) pages of the segment (clamped to size) and hash them as a scan does.
 * A segment truncated meanwhile ends the read early (*size shrinks), as scan_file does. */
static int read_range(rel_scan *s, uint8_t *buf, uint32_t first, uint32_t end,
                      uint64_t *size)
{
    uint64_t off = (uint64_t)first * PB_PAGE_SIZE;
    if (off >= *size)
        return 0;
    uint64_t want = (uint64_t)(end - first) * PB_PAGE_SIZE;
    size_t len = (size_t)(off + want > *size ? *size - off : want);
    pb_error rerr = PB_ERROR_INIT;
    if (scan_reread(s->ctx->scan, s->abspath, off, buf, len, &rerr) != 0) {
        struct stat st;
        if (stat(s->abspath, &st) == 0 && (uint64_t)st.st_size < off + len) {
            *size = (uint64_t)st.st_size < off ? off : (uint64_t)st.st_size;
            return 0; /* truncated during the backup: WAL replays the truncation */
        }
        *s->err = rerr;
        return pb_error_wrap(s->err, "reading the WAL-named blocks of %s", s->e->path);
    }
    mf_header(s->ctx->m)->bytes_read += len;
    return bk_rel_chunk(s, off, buf, len);
}

/* Read only the named blocks (sorted) and every page past the parent's end, coalesced. */
int bk_read_named(rel_scan *s, const uint32_t *blocks, size_t n, uint64_t *size_out)
{
    struct stat st;
    if (stat(s->abspath, &st) != 0)
        return PB_ENOENT; /* dropped since the walk */
    uint64_t size = s->e->size < (uint64_t)st.st_size ? s->e->size : (uint64_t)st.st_size;
    uint32_t npages = (uint32_t)((size + PB_PAGE_SIZE - 1) / PB_PAGE_SIZE);
    uint8_t *buf = malloc((size_t)WG_RUN_PAGES * PB_PAGE_SIZE);
    if (!buf)
        return pb_fail(s->err, PB_ENOMEM, "out of memory reading %s", s->e->path);
    uint32_t tail = s->old.npages < npages ? s->old.npages : npages;
    uint32_t start = 0, end = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i <= n; i++) {
        uint32_t b = i < n ? blocks[i] : UINT32_MAX;
        if (b >= tail)
            b = UINT32_MAX; /* the tail is read below */
        if (end && b != UINT32_MAX && b < end + WG_GAP_PAGES && b + 1 - start <= WG_RUN_PAGES) {
            end = b + 1;
            continue;
        }
        if (end)
            rc = read_range(s, buf, start, end, &size);
        if (b == UINT32_MAX)
            break;
        start = b;
        end = b + 1;
    }
    for (uint32_t p = tail; rc == 0 && p < npages; p += WG_RUN_PAGES)
        rc = read_range(s, buf, p, npages - p < WG_RUN_PAGES ? npages : p + WG_RUN_PAGES, &size);
    free(buf);
    *size_out = size;
    return rc;
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
