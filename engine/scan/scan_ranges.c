/*
 * engine/scan/scan_ranges.c — reading only some pages of a file (see scan_ranges in scan.h).
 *
 * Why: a WAL-guided incremental reads the blocks the WAL window names (docs/DESIGN.md,
 * "Rooms and arrows"). One synchronous request per block range would leave a
 * device that wants several requests in flight idle between them; here the ranges are
 * planned into requests (close ones joined: on a disk or SSD, reading a few pages more
 * costs less than one more request) and handed to the scanner's queue, so they get the
 * same queue depth, O_DIRECT, priority and yielding as a full scan (docs/DESIGN.md,
 * "Polite I/O").
 */
#include "engine/scan/scan_internal.h"

#include <stdlib.h>

static int push_span(scan_span **out, size_t *cap, size_t *n, uint64_t first,
                     uint64_t end)
{
    if (PB_GROW(*out, cap, *n + 1))
        return PB_ENOMEM;
    (*out)[*n].off = first * PB_PAGE_SIZE;
    (*out)[*n].len = (size_t)((end - first) * PB_PAGE_SIZE);
    (*n)++;
    return 0;
}

int scan_plan_spans(const scan_range *r, size_t n, uint32_t gap_pages, size_t max_len,
                    scan_span **out, size_t *nout, pb_error *err)
{
    uint64_t max_pages = max_len / PB_PAGE_SIZE;
    uint64_t start = 0, end = 0; /* the request being built: pages [start, end) */
    size_t cap = 0;
    *out = NULL;
    *nout = 0;
    if (max_pages == 0)
        return pb_fail(err, PB_EINVAL, "ranged read: requests of %zu bytes hold no page",
                       max_len);
    for (size_t i = 0; i < n; i++) {
        uint64_t first = r[i].first, left = r[i].count;
        if (i && first < (uint64_t)r[i - 1].first + r[i - 1].count) {
            free(*out);
            *out = NULL;
            *nout = 0;
            return pb_fail(err, PB_EINVAL, "ranged read: range %zu (page %llu) is not after "
                           "the one before", i, (unsigned long long)first);
        }
        while (left > 0) {
            uint64_t take;
            if (end > start && first - end < gap_pages && first < start + max_pages) {
                take = start + max_pages - first; /* join the request being built */
            } else {
                if (end > start && push_span(out, &cap, nout, start, end))
                    goto nomem;
                start = first;
                take = max_pages;
            }
            take = take < left ? take : left;
            end = first + take;
            first += take;
            left -= take;
        }
    }
    if (end > start && push_span(out, &cap, nout, start, end))
        goto nomem;
    return 0;
nomem:
    free(*out);
    *out = NULL;
    *nout = 0;
    return pb_fail(err, PB_ENOMEM, "ranged read: out of memory planning %zu ranges", n);
}

/* Follows the delivered chunks to find where a shrunk file ended. */
typedef struct span_watch {
    scan_chunk_cb cb;
    void *ctx;
    const scan_span *spans;
    size_t next;        /* the span the next chunk belongs to */
    uint64_t size;      /* st_size at open, the end of what may be read */
    uint64_t end;       /* where a short chunk found the file's end (0: none) */
    uint64_t bytes;
} span_watch;

static int watch_chunk(void *vw, uint64_t offset, const uint8_t *data, size_t len)
{
    span_watch *w = vw;
    const scan_span *sp = &w->spans[w->next++];
    uint64_t want = sp->off + sp->len < w->size ? sp->len : w->size - sp->off;
    if (len < want)
        w->end = offset + len;
    w->bytes += len;
    return w->cb(w->ctx, offset, data, len);
}

int scan_ranges(scanner *s, const char *path, const scan_range *r, size_t n,
                uint32_t gap_pages, scan_chunk_cb cb, void *ctx, scan_ranges_result *out,
                pb_error *err)
{
    scan_span *spans = NULL;
    size_t nspans = 0;
    scan_io_stats before, after;
    int rc = scan_plan_spans(r, n, gap_pages, scan_read_size(s), &spans, &nspans, err);
    if (rc)
        return rc;
    span_watch w = {cb, ctx, spans, 0, 0, 0, 0};
    scan_get_io_stats(s, &before);
    rc = scan_read_spans(s, path, spans, nspans, watch_chunk, &w, &w.size, err);
    scan_get_io_stats(s, &after);
    if (out) {
        out->size = w.size;
        /* A chunk came back short, or the read stopped before a span that starts within
         * the size at open (a read that found nothing): the file shrank there. */
        if (w.end)
            out->size = w.end;
        else if (rc == 0 && w.next < nspans && spans[w.next].off < w.size)
            out->size = spans[w.next].off;
        out->bytes = w.bytes;
        out->requests = after.requests - before.requests;
    }
    free(spans);
    return rc;
}
