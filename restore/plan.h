/*
 * restore/plan.h — what the rebuild core offers the rooms beside it (restore/verify/):
 * the restore plan (plan.c), what a restore, verify --set or rebase decides before it
 * reads a frame, built once per command (the target parsed once, the WAL archive listed
 * once, the backup chosen, and its chain resolved with each manifest read once); the
 * chain's manifests merged (plan_merge.c); and the rebuild of the chain's files
 * (rebuild.c, parallel.c).
 */
#ifndef PB_RESTORE_PLAN_H
#define PB_RESTORE_PLAN_H

#include "engine/pack/pack.h"
#include "restore/recovery/recovery.h"

struct rs_target;    /* restore_internal.h: a restore's target directory */
struct rs_db_filter; /* restore_internal.h: restore --db-include */

/* rs_plan_build needs: list the WAL archive even for a target (immediate, default
 * timeline) whose choice does not read it, because rs_plan_check will. */
#define RS_PLAN_WAL 1u

typedef struct rs_plan {
    rs_target_val tv;   /* opts' target, parsed once */
    rs_wal_view wal;    /* the one listing of wal/ (empty when nothing needed it) */
    char id[MF_ID_LEN]; /* the chosen backup */
    char why[512];      /* why it was chosen (for the log) */
    mf_backup *hdrs;    /* its chain's manifest headers, full backup first, id last */
    size_t nchain;
    rs_timeline tl;     /* the timeline recovery follows: computed once, by the choice
                         * when it had to follow it, else by rs_plan_check */
} rs_plan;

/* Build the plan for opts (opts->set, the target and timeline; the directory options are
 * not looked at). *out belongs to the caller: rs_plan_free. Errors are the choice's or
 * the chain's (PB_ENOENT: no usable backup; PB_ECORRUPT: a damaged manifest; PB_EINVAL:
 * a target that cannot be read or placed). */
int rs_plan_build(repo *r, const rs_opts *opts, unsigned needs, rs_plan **out,
                  pb_error *err);
void rs_plan_free(rs_plan *p); /* accepts NULL */
/* Before anything is read or written: the WAL the chosen backup's restore needs along
 * the timeline recovery follows (rs_check_wal, against the plan's listing: built with
 * RS_PLAN_WAL); sets p->tl. The manifest's entries are checked by rs_plan_outline. */
int rs_plan_check(rs_plan *p, const rs_opts *opts, pb_error *err);
/* The chosen backup's manifest header: the chain's last. */
const mf_backup *rs_plan_header(const rs_plan *p);

/* What a restore needs of the chosen manifest besides the files it rebuilds, read in one
 * pass over its stream: every entry checked (rs_check_entry) before anything is
 * written, and kept in m without runs or page hashes: directories, links and
 * tablespace_map always, with `files` every entry (a delta restore prunes what m does not
 * name). So m grows with the number of directories (with files: of entries), never with
 * the pages of the database. */
typedef struct rs_outline {
    mf_manifest *m;
    rs_progress totals; /* regular files and their bytes */
    uint64_t peak;      /* manifest bytes held building it: the stream's and m's */
} rs_outline;
int rs_plan_outline(repo *r, const rs_plan *p, bool files, rs_outline *out, pb_error *err);
void rs_outline_free(rs_outline *o); /* accepts NULL */

/* The context a chain's files are rebuilt in, and where their pages go: beneath
 * target_dir (a restore), to sink (a rebase), or nowhere (target_dir and sink NULL:
 * verify --set, which reads and checks every page only). */
typedef struct rs_ctx {
    repo *repo;
    const mf_backup *hdrs; /* the chain's headers: its full backup first, the restored last */
    size_t nchain;
    const char *target_dir; /* NULL when verifying */
    const struct rs_target *target; /* set when target_dir is */
    bool delta;
    const struct rs_db_filter *dbf; /* restore --db-include: files restored as stubs */
    uint8_t *frame;    /* decompressed frame, PACK_MAX_FRAME_RAW */
    uint8_t *existing; /* delta: the pages already in the target */
    pack_reader *reader; /* one zstd context reused for every frame */
    pack_source *source; /* planned range reads and readahead (engine/pack/pack.h) */
    uint64_t source_budget; /* bytes its buffers may hold (0: PACK_SOURCE_BUDGET) */
    uint64_t max_memory; /* rs_opts.max_memory: split by rs_rebuild_parallel */
    /* Which frame ctx->frame holds decoded, so runs sharing a frame decode it once. */
    bool frame_valid;
    uint32_t frame_backup, frame_pack, frame_len;
    uint64_t frame_offset;
    rs_stats *stats;
    /* rebase: every verified page/frame is handed here instead of being written */
    int (*sink)(void *sink_ctx, const mf_file *f, uint64_t offset, const uint8_t *data,
                size_t len, pb_error *err);
    void *sink_ctx;
    rs_progress_fn progress; /* rs_opts.progress: called by rs_rebuild_parallel */
    void *progress_ctx;
} rs_ctx;

/* A restore worker's and a rebase's pack source budget by default (rs_ctx.source_budget):
 * one largest planned range, one frame and 1 MiB of read-ahead. A rebase left at
 * PACK_SOURCE_BUDGET filled its 16 MiB once a database had large segments. */
#define RS_DEFAULT_SOURCE (PACK_SOURCE_MIN_BUDGET + (1u << 20))

/* Rebuild one regular file (MF_REL or MF_FILE) of the chain's last backup. recs[i] is
 * backup i's record of the file (NULL: it has none), recs[nchain - 1] the file itself:
 * one path of the chain's merged manifests (mf_merge_next), nothing else is looked up. */
int rs_rebuild_file(rs_ctx *ctx, const mf_file *const *recs, pb_error *err);

/* Rebuild every regular file of the restored backup with `jobs` workers copying proto's
 * settings, taking the files from mg (the chain's manifests merged, proto->nchain
 * streams; mg stays the caller's) in batches; totals: what progress counts against.
 * The workers' statistics are added to proto->stats, and the most record bytes they
 * held at once to proto->stats->manifest_peak. */
int rs_rebuild_parallel(const rs_ctx *proto, mf_merge *mg, const rs_progress *totals,
                        unsigned jobs, pb_error *err);

/* ---- the chain's manifests as merged streams (plan_merge.c) ---- */
/* Open the stream of every backup of hdrs[0..n) (version 2: range reads, one chunk at a
 * time; version 1: read whole) and merge them. *out is the caller's (mf_merge_close). */
int rs_merge_open(repo *r, const mf_backup *hdrs, size_t n, mf_merge **out, pb_error *err);
/* One path's records copied out of a merge, so they outlive the next mf_merge_next. */
typedef struct rs_recs {
    mf_file *files;      /* n slots; files[i].path NULL where backup i has none */
    const mf_file **ptr; /* n pointers: &files[i] or NULL, as rs_rebuild_file takes them */
    size_t n;
    uint64_t bytes;      /* what the copies hold */
} rs_recs;
int rs_recs_copy(rs_recs *dst, const mf_file *const *src, size_t n, pb_error *err);
void rs_recs_clear(rs_recs *r); /* frees the copies, keeps the arrays */
/* A restore worker's batch closes once its copies hold this much, so a worker holds the
 * records of at most one large file beyond it: a 1 GiB segment of a full backup carries
 * 1 MiB of page hashes, and a batch of several held several MiB per worker as soon as a
 * database had several segments (docs/DESIGN.md, "Memory"). */
#define RS_BATCH_BYTES (256u << 10)
/* The next regular files (MF_REL, MF_FILE) of the merge's last backup, copied into
 * batch[0..*n) until max files or until their copies hold max_bytes or more (always one
 * file at least, whatever its size); *bytes is what the copies hold. *end: the merge is
 * exhausted (the files of this batch, if any, are still to be rebuilt). */
int rs_recs_batch(mf_merge *mg, size_t nchain, rs_recs *batch, size_t max, uint64_t max_bytes,
                  size_t *n, uint64_t *bytes, bool *end, pb_error *err);
void rs_recs_free(rs_recs *r);  /* accepts NULL */

/* Allocate / free the buffers and decoder of a context. */
int rs_ctx_buffers(rs_ctx *ctx, pb_error *err);
void rs_ctx_free_buffers(rs_ctx *ctx);

/* Verify: backup id's database list, when it has one, is intact (PB_ECORRUPT names it). */
int rs_db_list_check(repo *r, const char *id, pb_error *err);

/* (guard.c) A manifest entry may be created beneath a target: safe path, links only at
 * pg_tblspc/<oid> and pg_wal with a bounded target. PB_ECORRUPT names the path. */
int rs_check_entry(const mf_file *f, pb_error *err);

/* ---- opening the set: what restore, verify --set and rebase do first (plan.c) ---- */
#define RS_OPEN_WAL 1u         /* list wal/ and check the WAL the restore of the set needs:
                                * listed (rs_plan_check), then read whole (rs_check_replay) */
#define RS_OPEN_TABLESPACES 2u /* and refuse a tablespace replay creates in a non-empty
                                * directory of this host (a restore writes) */
#define RS_OPEN_OUTLINE 4u     /* read the chosen manifest's outline into *ol */
#define RS_OPEN_ENTRIES 8u     /* the outline keeps every entry (a delta restore prunes) */
/* Build the plan for opts (*p, the caller's to rs_plan_free: set as soon as it is built,
 * so a later step's failure can name the backup), say "<doing> backup <id>: <why>" when
 * doing is not NULL, then the checks and the outline that how asks for, in that order,
 * before anything is read from a pack or written. */
int rs_set_open(repo *r, const rs_opts *opts, unsigned how, const char *doing, rs_plan **p,
                rs_outline *ol, pb_error *err);
/* A rebuild context for the plan's chain (repository, headers, statistics; the rest
 * zero): the caller sets where the pages go, then rs_ctx_buffers. */
void rs_ctx_init(rs_ctx *ctx, repo *r, const rs_plan *p, rs_stats *stats);

#endif
