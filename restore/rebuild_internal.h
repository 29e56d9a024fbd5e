/* restore/rebuild_internal.h — what rebuild.c and assemble.c share: the steps that read
 * (frame_check.c), check and write (write_target.c) a window's pages, and the region by
 * region assembly (assemble.c) rebuild.c hands a window to. */
#ifndef PB_RESTORE_REBUILD_INTERNAL_H
#define PB_RESTORE_REBUILD_INTERNAL_H

#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "restore/srcmap.h"

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
/* ---- reading and checking frames (frame_check.c) ---- */
/* Bytes of a pack through the context's source; counts what was read. */
int rb_fetch_span(rs_ctx *ctx, const char *key, uint64_t start, size_t span,
                  const uint8_t **out, pb_error *err);
/* The pages a run takes must lie inside its decoded frame of got bytes. */
int rb_check_fit(const rs_ctx *ctx, const mf_file *f, const char *key, uint32_t bidx,
                 const mf_run *run, size_t got, pb_error *err);
/* Page p (from backup bidx, frame of run) against its recorded hash. */
int rb_check_page(const rs_ctx *ctx, const mf_file *f, const mf_file *fi, const mf_run *run,
                  uint32_t bidx, uint32_t p, const rs_src *ps, const uint8_t *page,
                  pb_error *err);

/* ---- region by region (assemble.c) ---- */
/* Rebuild the map's window of f region by region in page order, each region written
 * once; *rc is its result. false when one backup alone supplies
 * the window, or more than it may hold frames of: nothing was read or written, and the
 * caller goes backup by backup instead. */
bool rb_assemble_window(rs_ctx *ctx, int fd, const mf_file *const *recs, const rs_srcmap *map,
                        int *rc, pb_error *err);

#endif
