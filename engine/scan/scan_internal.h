/*
 * engine/scan/scan_internal.h — what scan.c and scan_ranges.c share, private to engine/:
 * a ranged read is planned into requests (scan_ranges.c, pure) and the requests are
 * read by the scanner's own queue (scan.c), so both paths have the same O_DIRECT,
 * queue depth, I/O priority, yielding and accounting.
 */
#ifndef PB_ENGINE_SCAN_INTERNAL_H
#define PB_ENGINE_SCAN_INTERNAL_H

#include "engine/scan/scan.h"

/* One read request: len bytes at off, both whole pages. */
typedef struct scan_span {
    uint64_t off;
    size_t len;
} scan_span;

/* Plan the requests reading ranges r[0..n) (sorted, not overlapping): a range that
 * starts fewer than gap_pages pages after the request being built ends joins it (the
 * pages between are read too), as long as the request stays within max_len bytes; a
 * longer range is split. *out (free it) gets *nout requests, in file order. PB_EINVAL
 * when r is not sorted or overlaps; PB_ENOMEM. Pure: no I/O. */
int scan_plan_spans(const scan_range *r, size_t n, uint32_t gap_pages, size_t max_len,
                    scan_span **out, size_t *nout, pb_error *err);

/* Read spans[0..n) of path (page-aligned, in order, each at most the read size) with the
 * scanner's queue, delivering each to cb as scan_file does; requests past the file's size
 * at open are dropped, one crossing it ends there, a short one (the file shrank) ends the
 * read. *size_at_open receives st_size at open. PB_ENOENT when path vanished. */
int scan_read_spans(scanner *s, const char *path, const scan_span *spans, size_t n,
                    scan_chunk_cb cb, void *ctx, uint64_t *size_at_open, pb_error *err);

/* The scanner's request size (bytes, whole pages): the longest span it reads. */
size_t scan_read_size(const scanner *s);

#endif
