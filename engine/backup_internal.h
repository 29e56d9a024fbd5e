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
#include "engine/walguide_internal.h"

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
    /* Reading less (engine/backup_skip.c). */
    const mf_manifest *parent; /* header of the chain head this incremental diffs against,
                                * or NULL (its records: bk_parent_find) */
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
    bk_io_report io;     /* what was applied and counted (backup_polite.c) */
    pgc_control ctl_now; /* pg_control just after pg_backup_start (backup_identity.c) */
} bk_ctx;

/* ---- the file-level skip rule (engine/backup_skip.c) -------------------------------- */

/* Why a relation segment is read or skipped; decisions read the value, people the name. */
typedef enum bk_skip_verdict {
    BK_SKIP = 0,             /* size and mtime equal the parent's, mtime before its horizon */
    BK_READ_NEW,             /* not a relation segment in the parent backup */
    BK_READ_NO_HORIZON,      /* the parent recorded no mtime horizon (an older manifest) */
    BK_READ_INODE,           /* replaced under the same name (both inodes known) */
    BK_READ_MTIME_FUTURE,    /* mtime after the server's clock now */
    BK_READ_MTIME_BACKWARDS, /* mtime before the parent's */
    BK_READ_SIZE_SAME_MTIME, /* the size changed but the mtime did not */
    BK_READ_CHANGED,         /* the size or mtime moved: the ordinary change */
    BK_READ_RECENT,          /* mtime not before the parent's horizon: may have changed after
                              * the parent read it */
} bk_skip_verdict;
#define BK_SKIP_NVERDICTS 9

typedef struct bk_skip_stat {
    uint64_t size;
    int64_t mtime;
    uint64_t inode; /* 0 = unknown */
} bk_skip_stat;

/* The rule (pgBackRest's, on the server's clock): skip only when prev exists, the parent's
 * horizon is known, the inode is unchanged when both are known, the mtime is not in the
 * future (after now) and equals prev's, the size equals prev's, and the mtime lies before
 * the parent's horizon. prev NULL: not in the parent. Pure: no I/O. */
bk_skip_verdict bk_skip_decide(const bk_skip_stat *cur, const bk_skip_stat *prev,
                               int64_t parent_horizon, int64_t now);
const char *bk_skip_verdict_name(bk_skip_verdict v);

/* Is a verify scan due for an incremental on top of chain c (full first)? Counts the
 * incrementals since the last backup that read every page (a full, a scan-mode
 * incremental, an older manifest without a read mode, or a verify scan). why (may be
 * NULL) receives the reason when due. */
bool bk_verify_due(const chain *c, unsigned every, int64_t after_secs, int64_t now,
                   char *why, size_t why_len);

/* Choose how this backup reads (sets ctx->skip_on, ctx->verify, ctx->wal and the header's
 * read_mode) and log why; for WAL guidance it decodes the WAL window (walguide_read.c). Called after pg_backup_start, with ctx->parent, the catalog and the server
 * clock set; plan is the chain this incremental builds on (NULL for a full). */
int bk_choose_read(bk_ctx *ctx, const chain *plan_chain, bool parent_is_head, pb_error *err);
/* Log what the skip rule decided (files and bytes skipped, segments read and why) and, for a
 * verify scan, what it found. */
void bk_report_read(const bk_ctx *ctx);
/* The server's clock now, following it from ctx->server_start (unix s). */
int64_t bk_server_now(const bk_ctx *ctx);
/* The mtime horizon a backup records when the server's clock read server_second (the
 * floor of its time) just before the walk: one second back. A write after the walk comes
 * at or after that reading, so its mtime, even from the kernel's coarse clock (behind by
 * a tick, well under a second), is not below it: no wait for the next second is needed
 * (backup.c). Pure. */
int64_t bk_mtime_horizon(int64_t server_second);
/* The rule's verdict on relation segment e for this backup (counted in ctx->verdicts);
 * prev is the parent's entry for e (NULL if none). The test fault backup.skip-miss turns
 * a "changed" verdict into a skip. */
bk_skip_verdict bk_skip_file(bk_ctx *ctx, const walk_entry *e, const mf_file *prev);
/* The bytes of e this backup expects to read, for the progress total, from the walk and
 * the parent's header alone (the parent's records are streamed once, by the backup): 0
 * for a segment untouched since before the parent's mtime horizon when the skip rule
 * applies, the named blocks of a WAL-guided one when the block set is in memory, else
 * the whole size. Pure prediction (counts nothing); the backup corrects the total by what
 * each file really read. */
uint64_t bk_planned_read(const bk_ctx *ctx, const walk_entry *e);


/* Full or incremental, decided before the server's backup state is touched
 * (backup_plan.c). */
typedef struct bk_plan {
    char type;              /* 'F' or 'I' */
    char reason[1400];      /* why, for the log */
    char latest[MF_ID_LEN]; /* the last id in the repository ("" if none): new ids sort after */
    chain chain;            /* 'I': the chain head's chain, headers only (no records) */
    const mf_manifest *parent; /* 'I': the chain head (the chain's last); else NULL */
} bk_plan;

/* Decide for a backup of the cluster system_id, now on timeline tli (0: unknown). The
 * head is the newest backup along tli's history (engine/chain_timeline.c; with tli 0,
 * the newest timeline's in the archive, and competing branches plan a full). A
 * repository that cannot be read well enough to build on (no backup, a damaged or
 * foreign head, a broken chain) plans a full backup with the reason; only a failed
 * listing is an error. Free with bk_plan_free. */
int bk_plan_type(repo *r, const bk_opts *opts, uint64_t system_id, uint32_t tli,
                 bk_plan *plan, pb_error *err);
void bk_plan_free(bk_plan *plan); /* accepts NULL */

/* Page-cache residue (backup_cache.c): the resident bytes of the file at path now (0 when
 * it cannot be mapped); after reading it, add what became resident since before to
 * ctx->io.page_cache_left_bytes. */
uint64_t bk_cache_resident(const char *path);
void bk_cache_left(bk_ctx *ctx, const char *path, uint64_t before);

/* Tell opts->progress (if any) that bytes more were read. */
void bk_progress_note(bk_ctx *ctx, uint64_t bytes);
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

/* ---- the file records (engine/backup_records.c): memory bounded by a chunk ---------- */
/* After init_manifest: the spool in the state directory and the streaming writer. */
int bk_records_open(bk_ctx *ctx, pb_error *err);
/* Record f (as mf_add_file: on success f's pointers are taken). Paths come in walk order;
 * the few out of it (pg_control, backup_label, tablespace_map) are held aside. While
 * records wait for their frames (bk_record_later), f waits behind them. */
int bk_record_add(bk_ctx *ctx, mf_file *f, pb_error *err);
/* Records waiting for frames, at most: the walk's next files are read meanwhile. A full
 * queue, or one holding more than BK_PENDING_BYTES (hashes and runs), waits for its oldest
 * record's frames (a drain wait, bk_stages), so memory stays flat. The frames
 * in flight are bounded by the pipe's buffers, so more than a few files are pending only
 * behind a slow frame. */
#define BK_PENDING_FILES 64u
#define BK_PENDING_BYTES (4u << 20)
/* Record f once the frames of handle frames (bk_pipe_file_end) are stored: f.runs are
 * theirs then. As bk_record_add, the caller clears f after a failure (a no-op when f was
 * queued: its pointers are taken at once). f NULL: the file vanished, its frames land
 * unrecorded. frames NULL: as bk_record_add. */
int bk_record_later(bk_ctx *ctx, mf_file *f, bk_pipe_file *frames, pb_error *err);
/* Write the pending records whose frames are stored, oldest first (never one before an
 * earlier one); all: wait for every one (before pg_backup_stop). The first failure names
 * the file whose frames failed. */
int bk_records_settle(bk_ctx *ctx, bool all, pb_error *err);
size_t bk_records_pending(const bk_ctx *ctx);
/* Write the manifest with ctx->m's header (final by now) and commit it: the object
 * appears whole or not at all. Fills ctx->io's manifest_*_peak. */
int bk_records_commit(bk_ctx *ctx, pb_error *err);
/* After the commit: make the committed records the catalog's head, streamed. */
int bk_records_apply(bk_ctx *ctx, mf_catalog *cat, pb_error *err);
/* The parent's record of path (*out NULL when it has none), read forward along the
 * walk's path order; *out is valid until the next call. */
int bk_parent_find(bk_ctx *ctx, const char *path, const mf_file **out, pb_error *err);
/* A cursor over the parent's records (bk_parent_find's, one per backup: the progress
 * plan reads none): a forward-only find. Start with BK_CURSOR_INIT. */
typedef struct bk_cursor {
    mf_stream *s;
    mf_file cur;  /* the record at the cursor */
    int state;    /* 1: cur holds one; 0: past the end (or closed); -1: not opened */
} bk_cursor;
#define BK_CURSOR_INIT {NULL, {0}, -1}
int bk_cursor_find(bk_ctx *ctx, bk_cursor *c, const char *path, const mf_file **out,
                   pb_error *err);
void bk_cursor_close(bk_cursor *c); /* what a cursor holds; it reads nothing more */
void bk_records_free(bk_records *rec); /* accepts NULL */

/* Back up one walked entry into ctx->rec. A file that vanished is skipped (not an error). */
int bk_file(bk_ctx *ctx, const walk_entry *e, pb_error *err);
/* Store a file whose content is in memory (backup_label, tablespace_map). */
int bk_memory_file(bk_ctx *ctx, const char *path, const void *data, size_t len, pb_error *err);

/* ---- what a backup proves before it reads or trusts (engine/backup_identity.c) ---- */
/* pgdata is the connected server's data directory: its global/pg_control has the
 * server's system identifier and it is the server's data_directory (device and inode).
 * PB_ESTATE naming both values otherwise. */
int bk_check_pgdata(const char *pgdata, const pgc_info *info, pb_error *err);
/* Record c (read right after pg_backup_stop) as h's stop point. */
void bk_record_stop_control(mf_backup *h, const pgc_control *c);
/* pb_hash64 of pgdata/pg_wal/<tli>.history (of nothing for timeline 1); false when it
 * cannot be read. */
bool bk_history_hash(const char *pgdata, uint32_t tli, uint64_t *out);
/* Does pg_control now follow the parent ph's recorded stop point (same system, checksum
 * version, timeline and timeline history, latest checkpoint not before it)? history: the
 * current timeline's bk_history_hash, NULL when unreadable. false with why filled when
 * not, or when ph recorded none. */
bool bk_control_follows(const mf_backup *ph, const pgc_control *now, const uint64_t *history,
                        char *why, size_t len);
/* h->read_why = why, bounded, quotes and control characters replaced. */
void bk_set_read_why(mf_backup *h, const char *why);

/* ---- a backup from a hot standby; the database list (backup_standby.c) ---- */
/* Before pg_backup_start: an incremental from a standby waits (wal_timeout_secs) until
 * the standby has replayed past its parent's stop LSN. 0 at once on a primary. */
int bk_standby_before_start(bk_ctx *ctx, pgc *conn, pb_error *err);
/* After pg_backup_stop: the label's start timeline is the recorded one; on a standby the
 * end is on that timeline too, not before the parent's end, and replayed by the standby
 * (a bounded wait). PB_ESTATE otherwise. */
int bk_standby_after_stop(bk_ctx *ctx, pgc *conn, const char *label, pb_error *err);
/* Store backup/<id>/databases (pg_database's names and OIDs), before the manifest. */
int bk_put_databases(bk_ctx *ctx, pgc *conn, pb_error *err);

/* Fixed costs (engine/backup_polite.c): add the time since *mark to *field and move *mark
 * to now; log the backup's steps end to end (one line, with the scan's share). */
void bk_stage_mark(double *mark, double *field);
void bk_log_fixed_costs(const bk_stages *st);

#endif
