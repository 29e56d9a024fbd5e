/*
 * engine/backup.h — taking a backup (prefix bk_): online start/stop on one libpq
 * session, walk, O_DIRECT scan, page inspection, diff against the chain head,
 * pack, WAL check, manifest commit last.
 */
#ifndef PB_ENGINE_BACKUP_H
#define PB_ENGINE_BACKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/storage/storage.h"
#include "manifest/manifest.h"

typedef enum bk_checksum_policy { BK_CHECKSUM_WARN = 0, BK_CHECKSUM_FAIL = 1 } bk_checksum_policy;

/* How an incremental finds what changed (--incremental-mode; docs/GUIDE.md). */
typedef enum bk_incr_mode {
    BK_INCR_AUTO = 0, /* WAL-guided when possible, else file-level skip */
    BK_INCR_SCAN = 1, /* read and hash every page */
    BK_INCR_FILE = 2, /* skip relation segments whose size and mtime prove them unchanged */
    BK_INCR_WAL = 3,  /* file-level skip, then only the blocks the archived WAL names */
} bk_incr_mode;

typedef struct bk_opts {
    const char *pgdata;     /* data directory; NULL = the server's data_directory */
    const char *conninfo;   /* libpq connection string; NULL = PG* environment */
    const char *state_dir;  /* local catalog directory */
    char type;              /* 'F' full, 'I' incremental, 0 = automatic */
    size_t read_size;       /* 0 = automatic: the md stripe, 512 KiB on a single device */
    unsigned queue_depth;   /* 0 = automatic (scan_plan_io in engine/scan.h) */
    bool use_uring;
    bool direct;
    bk_checksum_policy on_checksum_error;
    int zstd_level;
    unsigned full_every;     /* take a full after this many backups in a chain (0 = never) */
    int64_t full_after_secs; /* take a full when the chain's full is older (0 = never) */
    unsigned wal_timeout_secs;
    uint64_t pack_size;      /* target pack object size */
    uint64_t max_rate;       /* read at most this many bytes per second (0 = unlimited) */
    int nice;                /* scheduler niceness for the backup process (0 = unchanged) */
    bk_incr_mode incr_mode;
    /* --verify-scan: an incremental reads every page, checking the cheaper method, when
     * this many incrementals since the chain's last full scan would be reached (0 = never
     * by count) or when that scan is older than verify_after_secs (0 = never by age). */
    unsigned verify_every;
    int64_t verify_after_secs;
} bk_opts;

#define BK_OPTS_INIT {NULL, NULL, NULL, 0, 0, 0, true, true, BK_CHECKSUM_WARN, 1, 0, 0, \
                      300, 256ull << 20, 0, 10, BK_INCR_AUTO, 7, 7 * 86400}

/* Run one backup into r. On success *out is the committed manifest (the caller's: free
 * with mf_free), so a summary needs no second download; NULL on failure. */
int bk_run(repo *r, const bk_opts *opts, mf_manifest **out, pb_error *err);

/* What a backup cost beyond what its manifest's header records. */
typedef struct bk_result {
    repo_requests requests; /* object-store requests of this backup (storage.h) */
} bk_result;
/* bk_run, and *res filled (also on failure) with what the run cost. */
int bk_run_counted(repo *r, const bk_opts *opts, mf_manifest **out, bk_result *res,
                   pb_error *err);

#endif
