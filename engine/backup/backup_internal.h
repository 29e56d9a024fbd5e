/* engine/backup/backup_internal.h — a backup's state (bk_ctx), shared by the files of the
 * backup/ room; each file's own functions are declared in its own internal header
 * (backup_skip_internal.h, backup_records_internal.h, ...). */
#ifndef PB_ENGINE_BACKUP_INTERNAL_H
#define PB_ENGINE_BACKUP_INTERNAL_H

#include "engine/backup/backup.h"
#include "engine/backup/backup_pipe_internal.h"
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "engine/pg/pg.h"
#include "engine/scan/scan.h"
#include "engine/backup/walguide_internal.h"

#define BK_FRAME_PAGES 32u   /* pages per frame of bulk data (full runs): 256 KiB raw */
/* The changed pages of one region of a file (aligned) share frames, up to
 * BK_SCATTERED_PAGES pages per frame, as several runs (mf_run.frame_page): scattered pages
 * then cost one frame header and compress together, and a restore reads one frame
 * instead of one per page. A restore needs every page of such a frame, so a bigger one
 * costs it nothing, while more pages give zstd more shared context (page headers, tuple
 * layouts): scattered frames fill up to PACK_MAX_FRAME_RAW. Manifest format v2 carries
 * frame_page; with a writer of v1 (no frame_page) BK_SHARE_FRAMES must be 0: every run
 * then has its own frame. */
#define BK_SCATTERED_PAGES (PACK_MAX_FRAME_RAW / PB_PAGE_SIZE) /* 128: 1 MiB raw */
#define BK_REGION_PAGES 16384u /* 128 MiB: sparse random writes still fill frames */
#define BK_SHARE_FRAMES 1
/* A frame that is not one full run of BK_FRAME_PAGES pages holds scattered pages (an
 * incremental's random writes, a small file): few bytes, the costly ones per page, so
 * they are compressed harder (about a third smaller than at level 1 on pgbench's
 * random updates); bulk data (full runs) keeps the configured level. */
#define BK_SCATTERED_LEVEL 9
#define BK_REREAD_TRIES 5

typedef struct bk_records bk_records;

typedef struct bk_ctx {
    const bk_opts *opts;
    repo *repo;
    repo_lock *lock;     /* the repository's writer lock, renewed as files are read */
    mf_catalog *cat;     /* NULL for a full backup */
    scanner *scan;
    pack_writer *packs;  /* writers[0]: also used directly while the pipe is idle */
    pack_writer *writers[BK_PIPE_MAX_WORKERS]; /* one per compression worker */
    unsigned nwriters;
    mf_manifest *m;      /* being built: the header and counters (records: rec) */
    bk_records *rec;     /* the file records, streamed (backup_records.c) */
    const char *pgdata;
    const char *tblspc_dir; /* this cluster's PG_<major>_<catversion> (walk_pgdata_cluster) */
    uint64_t start_lsn;
    uint64_t prev_stop_lsn; /* 0 for a full backup */
    bool checksums;
    bool standby;        /* the server is a hot standby (backup_standby.c) */
    bk_pipe *pipe;       /* compression worker; frames are built in its buffers */
    double rate_start;   /* when throttled reading began */
    uint64_t rate_bytes; /* bytes read since then */
    /* Reading less (engine/backup/backup_skip.c). */
    const mf_manifest *parent; /* header of the chain head this incremental diffs against,
                                * or NULL (its records: bk_parent_find) */
    const chain_copy *parent_copy; /* its records read once (the plan's), or NULL */
    bool skip_on;        /* the file-level skip rule applies to this backup */
    bool verify;         /* verify scan: read every page, count what the skip missed */
    int64_t server_start; /* server clock at the start (unix s) */
    double local_start;   /* pb_now() at server_start, to follow the server clock */
    uint64_t verdicts[9]; /* relation segments per bk_skip_verdict */
    unsigned missed_logged; /* ERROR lines written for missed pages (bounded) */
    wg_set *wal;         /* WAL-guided: the blocks the window names; NULL = not guided */
    pgc *conn;           /* the backup's session (WAL summaries are asked for on it) */
    const pgv_facts *facts; /* the server's major (engine/pgver) */
    bool wal_log_hints;  /* the server's settings the guidance depends on */
    bool wal_minimal;
    uint64_t wal_whole;  /* segments WAL-guidance read whole (marked, or not a main fork) */
    uint64_t wal_guided; /* segments read by their named blocks only */
    bk_progress progress; /* what opts->progress is shown */
    bk_io_report io;     /* what was applied and counted (backup_throttle.c) */
    pgc_control ctl_now; /* pg_control just after pg_backup_start (backup_identity.c) */
    bk_io_report *report; /* the caller's copy (bk_result.io), taken by bk_finish_report */
} bk_ctx;

#endif
