/*
 * restore/restore.h — rebuilding a data directory from a backup chain (prefix rs_):
 * chain resolution, a one-pass rebuild of every file (each needed frame read once,
 * each page written once after its hash is verified), delta restore into an
 * existing directory, recovery configuration, and rebase (synthetic full); verify is
 * restore/verify/verify.h.
 */
#ifndef PB_RESTORE_H
#define PB_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/storage/storage.h"
#include "manifest/manifest.h"

typedef enum rs_target_kind {
    RS_TARGET_IMMEDIATE = 0, /* consistency at the backup's end (default) */
    RS_TARGET_TIME,
    RS_TARGET_LSN,
    RS_TARGET_XID,
    RS_TARGET_NAME,
    RS_TARGET_END, /* replay all archived WAL */
} rs_target_kind;

typedef struct rs_tblspc_map {
    unsigned oid;
    const char *dir;
} rs_tblspc_map;

/* What a running restore has rebuilt so far (files and bytes of regular files, against
 * the backup's totals), for a progress display. */
typedef struct rs_progress {
    uint64_t files_done, files_total;
    uint64_t bytes_done, bytes_total;
} rs_progress;

/* Called from the restore's workers, one call at a time, after each file. It must be
 * quick and must not call back into the restore; restore/ itself prints nothing. */
typedef void (*rs_progress_fn)(void *ctx, const rs_progress *p);
/* A progress hook for the commands without an rs_opts (verify, rebase); NULL or fn NULL:
 * none. verify of the whole repository counts backups as its files and the stored bytes
 * of their own frames as its bytes; verify --set and rebase count files and their sizes. */
typedef struct rs_progress_hook {
    rs_progress_fn fn;
    void *ctx;
} rs_progress_hook;

typedef struct rs_opts {
    const char *target_dir;
    const char *set;            /* backup id, "latest" or NULL (chosen from the target) */
    bool delta;                 /* rewrite only what differs in an existing directory */
    bool force;                 /* empty a non-empty target first */
    rs_target_kind target;
    const char *target_value;   /* time, LSN, xid or name */
    bool target_exclusive;
    const char *target_action;  /* promote (default), pause, shutdown */
    const char *target_timeline;/* latest (default), current, or an id */
    const rs_tblspc_map *tblspc;
    size_t ntblspc;
    const char *restore_command;/* the restore_command line PostgreSQL will run */
    unsigned jobs;              /* files rebuilt in parallel */
    const char *const *db_include; /* restore only these databases in full (db_filter.c) */
    size_t ndb_include;
    const char *state_dir;      /* local state: caches what the archived WAL holds (NULL: none) */
    rs_progress_fn progress;    /* NULL: no progress calls */
    void *progress_ctx;
    uint64_t max_memory;        /* --max-memory: workers' buffers + pack cache (0: defaults) */
    bool archive_preserve;      /* keep the source's archive_mode (default: write off) */
    bool standby;               /* --type standby: standby.signal, stays in recovery */
    const char *primary_conninfo; /* standby: primary_conninfo to stream from (NULL: archive) */
    bool target_immediate;      /* --target-immediate: stop at the backup's consistency */
} rs_opts;

#define RS_OPTS_INIT {NULL, NULL, false, false, RS_TARGET_IMMEDIATE, NULL, false, "promote", \
                      NULL, NULL, 0, NULL, 4, NULL, 0, NULL, NULL, NULL, 0, false, false, NULL, \
                      false}

typedef struct rs_stats {
    char id[MF_ID_LEN];
    uint64_t files_written, files_skipped, pages_written, pages_skipped, frames_read,
        bytes_fetched, bytes_written, files_removed;
    size_t chain_length;
    double seconds;
    repo_requests requests; /* object-store requests this restore made (storage.h) */
    uint64_t manifest_peak; /* most manifest bytes held at once (streams, outline, copies) */
    uint64_t frame_peak;    /* most decoded-frame bytes the region assembly held at once,
                             * summed over the workers (restore/assemble.c) */
    uint64_t files_direct;     /* relation files opened past the page cache (O_DIRECT) */
    uint64_t direct_fallbacks; /* relation files that went on buffered after O_DIRECT was
                                * tried: refused at open or at a write, or scattered pages
                                * coming backup by backup (restore/write_target.c) */
} rs_stats;

/* Is the recovery target (opts->target, target_value) readable? PB_EINVAL naming the
 * option and what it expects, before a repository is opened: a usage error. */
int rs_check_target(const rs_opts *opts, pb_error *err);

int rs_restore(repo *r, const rs_opts *opts, rs_stats *stats, pb_error *err);

/* Build a synthetic full backup from the chain ending at set (no database read). lock is
 * the writer lock the caller holds, renewed file by file (NULL: nothing to renew). When
 * that backup is a full or synthetic full already, nothing is written: out_id is "". */
int rs_rebase(repo *r, const char *set, int zstd_level, repo_lock *lock,
              const rs_progress_hook *progress, char out_id[MF_ID_LEN], pb_error *err);

/* A restore point found in the archived WAL (XLOG_RESTORE_POINT). */
typedef struct rs_restore_point {
    char name[64];
    uint64_t lsn;
    uint32_t tli;
    int64_t time; /* unix seconds */
} rs_restore_point;
typedef void (*rs_restore_point_cb)(void *ctx, const rs_restore_point *p);
/* Every restore point in the archived WAL along the newest timeline's path (the one
 * recovery follows by default; *tli its id), oldest first, from the first archived
 * segment on. state_dir: where what each segment holds is cached (NULL: nowhere). */
int rs_list_restore_points(repo *r, uint32_t seg_size, const char *state_dir,
                           rs_restore_point_cb cb, void *ctx, uint32_t *tli, pb_error *err);

#endif
