/* restore/restore_internal.h — shared by the files of restore/. */
#ifndef PB_RESTORE_INTERNAL_H
#define PB_RESTORE_INTERNAL_H

#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "restore/restore.h"

#include <dirent.h>

/* ---- the target directory, opened without following links (target.c) ---- */
typedef struct rs_target rs_target;

/* Open an existing target directory. allow_openat2 false forces the component walk
 * (tests of the fallback). */
int rs_target_open(rs_target **out, const char *dir, bool allow_openat2, pb_error *err);
void rs_target_free(rs_target *t); /* accepts NULL */
const char *rs_target_path(const rs_target *t);
int rs_target_fd(const rs_target *t);
/* A link the restore created or verified (rel "pg_tblspc/<oid>" or "pg_wal") whose
 * directory dir paths beneath rel resolve into. */
int rs_target_add_link(rs_target *t, const char *rel, const char *dir, pb_error *err);
size_t rs_target_nlinks(const rs_target *t);
int rs_target_link_fd(const rs_target *t, size_t i);
const char *rs_target_link_dir(const rs_target *t, size_t i);

#define RS_DIR_CREATE 1u  /* create missing directories (0700) */
#define RS_DIR_REPLACE 2u /* remove a link or file standing where a directory belongs */
/* Open directory rel ("" is the target) beneath the target without following links
 * other than registered ones; *out is a new fd the caller closes. A link in the way is
 * PB_EINVAL unless RS_DIR_REPLACE. */
int rs_target_dir(const rs_target *t, const char *rel, unsigned how, int *out, pb_error *err);
/* The parent directory of rel as with rs_target_dir, and rel's last component. */
int rs_target_parent(const rs_target *t, const char *rel, unsigned how, int *dirfd,
                     const char **base, pb_error *err);
/* Remove name in dfd recursively without following links; shown names it in errors. */
int rs_remove_at(int dfd, const char *name, const char *shown, pb_error *err);
/* A listing of directory dfd from its first entry, whoever read dfd before (closedir
 * it); NULL with errno set. */
DIR *rs_dir_list(int dfd);
/* As root: chown the tree to the target's owner, never through a foreign link, then
 * sync the file systems involved. */
int rs_target_fix_owner(const rs_target *t, pb_error *err);

/* ---- checks before anything is written (guard.c) ---- */
/* A manifest entry may be created beneath a target: safe path, links only at
 * pg_tblspc/<oid> and pg_wal with a bounded target. PB_ECORRUPT names the path. */
int rs_check_entry(const mf_file *f, pb_error *err);
/* Is path "pg_tblspc/<oid>"? Then *oid is the OID. */
bool rs_link_oid(const char *path, unsigned *oid);
/* PB_ESTATE when target_dir/postmaster.pid names a live process. */
int rs_check_not_running(const char *target_dir, pb_error *err);

/* ---- durability (durable.c) ---- */
/* fsync fd; the error names dir/rel. */
int rs_fsync(int fd, const char *dir, const char *rel, pb_error *err);
/* fsync every manifest directory, the tablespace directories, the target and the
 * parents of the directories a restore may have created. */
int rs_sync_dirs(const rs_target *t, const mf_manifest *m, pb_error *err);
/* fsync what rs_write_recovery and tablespace_map wrote, and the target directory. */
int rs_sync_recovery(const rs_target *t, pb_error *err);

/* Where the rebuilt pages go. write == false verifies only (rs_verify, rebase reads). */
typedef struct rs_ctx {
    repo *repo;
    const mf_backup *hdrs; /* the chain's headers: its full backup first, the restored last */
    size_t nchain;
    const char *target_dir; /* NULL when verifying */
    const rs_target *target; /* set when target_dir is */
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

/* The timeline recovery will follow, and the recovery_target_timeline that says so. */
typedef struct rs_timeline {
    uint32_t tli;
    char setting[16]; /* "latest", "current" or a timeline id */
} rs_timeline;


/* Check, before anything is written, that the repository holds the WAL the restore of
 * backup h needs for this target: start to stop on the timeline path recovery will
 * follow, and on to the target LSN for an LSN target. Names the first missing segment.
 * For other targets, reports how far the archived WAL runs without a gap. *tl is the
 * timeline followed (a target past a timeline branch is placed or refused here). */
int rs_check_wal(repo *r, const rs_opts *opts, const mf_backup *h, rs_timeline *tl,
                 pb_error *err);


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

/* ---- restore --db-include (db_filter.c) ---- */
typedef struct rs_db_filter {
    uint32_t *keep; /* OIDs of the databases restored in full */
    size_t nkeep, cap;
    bool active;    /* --db-include was given */
} rs_db_filter;

/* From opts->db_include and the database list of backup id; inactive (and 0) without
 * --db-include. An unknown name, or a backup without a list, is PB_EINVAL. *out is the
 * caller's: rs_db_filter_free. */
int rs_db_filter_build(repo *r, const rs_opts *opts, const char *id, rs_db_filter *out,
                       pb_error *err);
void rs_db_filter_free(rs_db_filter *f); /* accepts NULL */
/* Verify: backup id's database list, when it has one, is intact (PB_ECORRUPT names it). */
int rs_db_list_check(repo *r, const char *id, pb_error *err);
/* Rebase: the synthetic full to gets the database list of from (none: nothing to do). */
int rs_db_list_copy(repo *r, const char *from, const char *to, pb_error *err);
/* Is file a relation file of a database the filter leaves out (restored as a stub)? */
bool rs_db_filter_stub(const rs_db_filter *f, const mf_file *file);

#endif
