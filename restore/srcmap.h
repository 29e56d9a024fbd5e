/*
 * restore/srcmap.h — where each page of a relation file comes from in a chain (prefix
 * rs_src): the newest backup holding it, as pg_combinebackup's reconstruct.c decides
 * per block. One map serves the rebuild (rebuild.c, assemble.c) and verify (every page
 * of every chain has a source), a window of pages at a time.
 */
#ifndef PB_RESTORE_SRCMAP_H
#define PB_RESTORE_SRCMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest/manifest.h"

/* A relation file is mapped (and rebuilt) this many pages at a time: the source map of a
 * 1 GiB segment held whole took 1 MiB in every restore worker (docs/DESIGN.md,
 * "Memory"); one window takes 256 KiB, and a file of up to 256 MiB is still one window
 * (one read plan per backup). */
#define RS_SRCMAP_WINDOW 32768u

/* A page without a source yet (rs_src.backup). */
#define RS_NO_SOURCE UINT32_MAX

/* Pages [first, end) of the file a map covers. */
typedef struct rs_window {
    uint32_t first, end;
} rs_window;

/* One page's source: backup (its index in the chain) and the page's hash there. */
typedef struct rs_src {
    uint32_t backup;
    uint32_t hash_index;
} rs_src;

/* The sources of one window's pages: src[p - w.first] is page p's. */
typedef struct rs_srcmap {
    rs_src *src;       /* w.end - w.first slots, the caller's */
    rs_window w;
    uint32_t nsources; /* backups that supply a page of the window */
} rs_srcmap;

/* Fill m->src for the window m->w from recs[0..n), the chain's records of one file,
 * oldest first, the restored file last: newest backup first, each page from the newest
 * backup that holds it, until every page has one or a backup does not hold the file as
 * a relation (what is older is another file). Returns the pages left without a source
 * (their src.backup is RS_NO_SOURCE); sets m->nsources. */
uint32_t rs_srcmap_fill(rs_srcmap *m, const mf_file *const *recs, size_t n);

/* The source of page p when backup bidx supplies it in this window, else NULL. */
static inline const rs_src *rs_src_of(const rs_srcmap *m, uint32_t p, uint32_t bidx)
{
    if (p < m->w.first || p >= m->w.end || m->src[p - m->w.first].backup != bidx)
        return NULL;
    return &m->src[p - m->w.first];
}

/* Does backup bidx supply a page of run (of its record of f) in the map's window? */
bool rs_srcmap_needs(const rs_srcmap *m, const mf_run *run, const mf_file *f, uint32_t bidx);

#endif
