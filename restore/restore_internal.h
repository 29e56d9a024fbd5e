/* restore/restore_internal.h — shared by the files of restore/. */
#ifndef PB_RESTORE_INTERNAL_H
#define PB_RESTORE_INTERNAL_H

#include "engine/chain.h"
#include "engine/pack.h"
#include "restore/restore.h"

/* Where the rebuilt pages go. write == false verifies only (rs_verify, rebase reads). */
typedef struct rs_ctx {
    repo *repo;
    const chain *chain;
    const char *target_dir; /* NULL when verifying */
    bool delta;
    uint8_t *frame;    /* decompressed frame, PACK_MAX_FRAME_RAW */
    uint8_t *existing; /* delta: the pages already in the target */
    pack_reader *reader; /* one zstd context reused for every frame */
    uint8_t *span;       /* adjacent frames fetched with one range read */
    size_t span_cap;
    /* What span holds, for sequential readahead across files (see rebuild.c). */
    bool cached;
    uint32_t cache_backup, cache_pack;
    uint64_t cache_start, cache_len, cache_obj_size;
    size_t readahead;
    rs_stats *stats;
    /* rebase: every verified page/frame is handed here instead of being written */
    int (*sink)(void *sink_ctx, const mf_file *f, uint64_t offset, const uint8_t *data,
                size_t len, pb_error *err);
    void *sink_ctx;
} rs_ctx;

/* Rebuild one regular file (MF_REL or MF_FILE) of the chain's last backup. */
int rs_rebuild_file(rs_ctx *ctx, const mf_file *f, pb_error *err);

/* The timeline recovery will follow, and the recovery_target_timeline that says so. */
typedef struct rs_timeline {
    uint32_t tli;
    char setting[16]; /* "latest", "current" or a timeline id */
} rs_timeline;

/* Write recovery settings and recovery.signal into the restored directory;
 * recovery_target_timeline is tl->setting (as rs_check_wal chose it). */
int rs_write_recovery(const char *target_dir, const rs_opts *opts, const mf_backup *h,
                      const rs_timeline *tl, pb_error *err);

/* Check, before anything is written, that the repository holds the WAL the restore of
 * backup h needs for this target: start to stop on the timeline path recovery will
 * follow, and on to the target LSN for an LSN target. Names the first missing segment.
 * For other targets, reports how far the archived WAL runs without a gap. *tl is the
 * timeline followed (a target past a timeline branch is placed or refused here). */
int rs_check_wal(repo *r, const rs_opts *opts, const mf_backup *h, rs_timeline *tl,
                 pb_error *err);


/* Rebuild every regular file of m with `jobs` workers copying proto's settings; the
 * workers' statistics are added to proto->stats. */
int rs_rebuild_parallel(const rs_ctx *proto, const mf_manifest *m, unsigned jobs,
                        pb_error *err);

/* Allocate / free the buffers and decoder of a context. */
int rs_ctx_buffers(rs_ctx *ctx, pb_error *err);
void rs_ctx_free_buffers(rs_ctx *ctx);

#endif
