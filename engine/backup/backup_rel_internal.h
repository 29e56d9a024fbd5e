/* engine/backup/backup_rel_internal.h — one relation segment being backed up, shared by
 * backup_file.c (the page-by-page scan) and backup_wal_blocks.c (the WAL-guided read). */
#ifndef PB_ENGINE_BACKUP_REL_INTERNAL_H
#define PB_ENGINE_BACKUP_REL_INTERNAL_H

#include "engine/backup/backup_internal.h"

typedef struct rel_scan {
    bk_ctx *ctx;
    const walk_entry *e;
    char abspath[4096];
    mf_head_entry old;
    bool has_old;
    uint32_t run_first, run_count; /* the run being collected */
    bk_job *cur;     /* the frame being collected, a pipeline buffer */
    uint32_t frame_pages; /* pages in cur (its runs and the open run) */
    mf_file out;
    size_t runs_cap, hashes_cap, nhashes;
    uint8_t *reread; /* one aligned page for checksum retries */
    bool cheap_skip; /* verify scan: the skip rule would not have read this segment */
    uint64_t nmissed; /* ...yet these pages changed before the backup started */
    uint32_t missed[8]; /* the first of them, for the log */
    const uint32_t *named; /* verify scan, WAL-guided: the blocks the WAL window names */
    size_t nnamed;
    bool wal_check;      /* verify scan: a changed page outside named is a WAL miss */
    bool untrusted;      /* inode or mtime say the file was replaced or the clock moved */
    pb_error *err;
} rel_scan;

/* A scan_chunk_fn over a rel_scan: hash, compare and pack the pages of data. */
int bk_rel_chunk(void *vs, uint64_t offset, const uint8_t *data, size_t len);
/* The blocks WAL names in s's segment: *guided false to read it whole (WAL cannot vouch
 * for it: not a main fork, marked by a create/truncate/database copy, or new). */
int bk_wal_blocks(rel_scan *s, uint32_t **blocks, size_t *n, bool *guided);
/* Read only the named blocks (sorted) and every page past the parent's end, coalesced;
 * *size_out receives the size read (a truncation meanwhile shrinks it). */
int bk_read_named(rel_scan *s, const uint32_t *blocks, size_t n, uint64_t *size_out);

#endif
