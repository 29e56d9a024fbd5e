/* restore/rebuild_internal.h — what rebuild.c and assemble.c share: a window's source
 * map of a relation file and the steps that read, check and write its pages. */
#ifndef PB_RESTORE_REBUILD_INTERNAL_H
#define PB_RESTORE_REBUILD_INTERNAL_H

#include "restore/plan.h"
#include "restore/restore_internal.h"

/* Pages [first, end) of the file being rebuilt: src[p - first] is page p's source. */
typedef struct page_window {
    uint32_t first, end;
} page_window;

typedef struct page_src {
    uint32_t backup; /* index in the chain */
    uint32_t hash_index;
} page_src;

/* The sources of one window's pages. */
typedef struct page_map {
    const page_src *src;
    page_window w;
    uint32_t nsources; /* backups that supply a page of the window */
} page_map;

/* The source of page p when backup bidx supplies it in this window, else NULL. */
static inline const page_src *rb_source_of(const page_map *m, uint32_t p, uint32_t bidx)
{
    if (p < m->w.first || p >= m->w.end || m->src[p - m->w.first].backup != bidx)
        return NULL;
    return &m->src[p - m->w.first];
}

/* ---- writing the target (write_target.c) ---- */
/* Alignment of every buffer a relation file is written from: O_DIRECT's, 4096 on every
 * filesystem that takes it here (a coarser one refuses the write, and the file goes on
 * buffered). */
#define RB_IO_ALIGN 4096u
/* len bytes aligned to RB_IO_ALIGN (free() frees them), NULL when out of memory. */
uint8_t *rb_io_alloc(size_t len);
/* The rest of the file at fd is written through the page cache; true (and counted in
 * rs_stats.direct_fallbacks) when it was written past it until now. */
bool rb_write_buffered(rs_ctx *ctx, int fd);
/* Open f beneath the target without following links, O_DIRECT for a relation file
 * outside a delta restore where the filesystem takes it. A delta restore replaces a
 * link or directory standing where the file belongs (the link, never its target). */
int rb_open_target(rs_ctx *ctx, const mf_file *f, int *fd, pb_error *err);
/* Write (or hand to the sink, or in a delta restore skip when equal) len bytes at off. */
int rb_write_span(rs_ctx *ctx, int fd, const mf_file *f, uint64_t off, const uint8_t *data,
                  size_t len, pb_error *err);
/* Bytes of a pack through the context's source; counts what was read. */
int rb_fetch_span(rs_ctx *ctx, const char *key, uint64_t start, size_t span,
                  const uint8_t **out, pb_error *err);
/* The pages a run takes must lie inside its decoded frame of got bytes. */
int rb_check_fit(const rs_ctx *ctx, const mf_file *f, const char *key, uint32_t bidx,
                 const mf_run *run, size_t got, pb_error *err);
/* Whether backup bidx supplies a page of run in the map's window. */
bool rb_run_needed(const mf_run *run, const mf_file *f, const page_map *map, uint32_t bidx);
/* Page p (from backup bidx, frame of run) against its recorded hash. */
int rb_check_page(const rs_ctx *ctx, const mf_file *f, const mf_file *fi, const mf_run *run,
                  uint32_t bidx, uint32_t p, const page_src *ps, const uint8_t *page,
                  pb_error *err);

/* Rebuild the map's window of f region by region in page order, each region written
 * once (restore/assemble.c); *rc is its result. false when one backup alone supplies
 * the window, or more than it may hold frames of: nothing was read or written, and the
 * caller goes backup by backup instead. */
bool rb_assemble_window(rs_ctx *ctx, int fd, const mf_file *const *recs, const page_map *map,
                        int *rc, pb_error *err);

#endif
