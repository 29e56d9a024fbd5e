/* engine/backup_internal.h — state shared by backup.c and backup_file.c. */
#ifndef PB_ENGINE_BACKUP_INTERNAL_H
#define PB_ENGINE_BACKUP_INTERNAL_H

#include "engine/backup.h"
#include "engine/backup_pipe.h"
#include "engine/chain.h"
#include "engine/pack.h"
#include "engine/pgconn.h"
#include "engine/scan.h"
#include "engine/walk.h"

#define BK_FRAME_PAGES 32u   /* pages per frame: 256 KiB raw */
#define BK_REREAD_TRIES 5

typedef struct bk_ctx {
    const bk_opts *opts;
    repo *repo;
    repo_lock *lock;     /* the repository's writer lock, renewed as files are read */
    mf_catalog *cat;     /* NULL for a full backup */
    scanner *scan;
    pack_writer *packs;  /* writers[0]: also used directly while the pipe is idle */
    pack_writer *writers[BK_PIPE_MAX_WORKERS]; /* one per compression worker */
    unsigned nwriters;
    mf_manifest *m;      /* being built */
    const char *pgdata;
    const char *tblspc_dir; /* this cluster's PG_<major>_<catversion> (walk_pgdata_cluster) */
    uint64_t start_lsn;
    uint64_t prev_stop_lsn; /* 0 for a full backup */
    bool checksums;
    bool standby;        /* the server is a hot standby (backup_standby.c) */
    bk_pipe *pipe;       /* compression worker; frames are built in its buffers */
    double rate_start;   /* when throttled reading began */
    uint64_t rate_bytes; /* bytes read since then */
    bk_io_report io;     /* what was applied and counted (backup_polite.c) */
} bk_ctx;

/* Full or incremental, decided before the server's backup state is touched
 * (backup_plan.c). */
typedef struct bk_plan {
    char type;              /* 'F' or 'I' */
    char reason[1400];      /* why, for the log */
    char latest[MF_ID_LEN]; /* the last id in the repository ("" if none): new ids sort after */
    chain chain;            /* 'I': the chain head's chain, each manifest read once */
    const mf_manifest *parent; /* 'I': the chain head (the chain's last); else NULL */
} bk_plan;

/* Decide for a backup of the cluster system_id. A repository that cannot be read well
 * enough to build on (no backup, a damaged or foreign head, a broken chain) plans a full
 * backup with the reason; only a failed listing is an error. Free with bk_plan_free. */
int bk_plan_type(repo *r, const bk_opts *opts, uint64_t system_id, bk_plan *plan,
                 pb_error *err);
void bk_plan_free(bk_plan *plan); /* accepts NULL */

/* Plan the reads, apply --io-class and --max-memory, open ctx->scan (backup_polite.c). */
int bk_open_scanner(bk_ctx *ctx, const bk_opts *opts, pb_error *err);
/* --cpu-weight: move the process into a new cgroup with that weight, or say why not. */
void bk_apply_cpu_weight(const bk_opts *opts, bk_io_report *io);
/* Leave and remove that cgroup (at the end of bk_run). */
void bk_release_cpu_weight(bk_io_report *io);
/* Log what was applied and counted; copy it to opts->report when given. */
void bk_finish_report(bk_ctx *ctx);

/* Sleep as needed to keep reads under opts->max_rate. */
void bk_throttle(bk_ctx *ctx, size_t bytes);

/* Back up one walked entry into ctx->m. A file that vanished is skipped (not an error). */
int bk_file(bk_ctx *ctx, const walk_entry *e, pb_error *err);
/* Store a file whose content is in memory (backup_label, tablespace_map). */
int bk_memory_file(bk_ctx *ctx, const char *path, const void *data, size_t len, pb_error *err);

/* ---- a backup from a hot standby; the database list (backup_standby.c) ---- */
/* Before pg_backup_start: an incremental from a standby waits (wal_timeout_secs) until
 * the standby has replayed past its parent's stop LSN. 0 at once on a primary. */
int bk_standby_before_start(bk_ctx *ctx, pgc *conn, pb_error *err);
/* After pg_backup_stop: the label's start timeline is the recorded one; on a standby the
 * end is on that timeline too and not before the parent's end. PB_ESTATE otherwise. */
int bk_standby_after_stop(bk_ctx *ctx, pgc *conn, const char *label, pb_error *err);
/* Store backup/<id>/databases (pg_database's names and OIDs), before the manifest. */
int bk_put_databases(bk_ctx *ctx, pgc *conn, pb_error *err);

#endif
