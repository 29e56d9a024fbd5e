/*
 * engine/backup/backup.h — taking a backup (prefix bk_): online start/stop on one libpq
 * session, walk, O_DIRECT scan, page inspection, diff against the chain head,
 * pack, WAL check, manifest commit last.
 */
#ifndef PB_ENGINE_BACKUP_H
#define PB_ENGINE_BACKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"
#include "engine/chain/chain.h"
#include "engine/scan/scan.h"
#include "engine/storage/storage.h"
#include "manifest/manifest.h"

/* CPU priority of the hashing/compression workers (--cpu-priority). */
typedef enum bk_cpu_priority {
    BK_CPU_IDLE = 0, /* SCHED_IDLE, nice 19 where refused (default) */
    BK_CPU_NICE,     /* nice 19 */
    BK_CPU_NORMAL,   /* as the process */
} bk_cpu_priority;

/* Where the time of a backup went (the log's summary and --report's "stages"). The reading
 * thread's seconds add up to scan_seconds: read_wait + pauses + queue_wait + page_work; the
 * workers' are sums over all workers (docs/DESIGN.md, "Polite I/O"). */
typedef struct bk_stages {
    double scan_seconds;       /* the reading thread's walk and scan of every file */
    double read_wait_seconds;  /* ... waiting for its reads (io_uring completions, preads) */
    double pause_seconds;      /* ... pausing while yielding to others' reads */
    double queue_wait_seconds; /* ... blocked on compression: a full queue, a file's drain */
    double page_work_seconds;  /* ... the rest: page checks, hashing, diffing, framing */
    double compress_seconds;   /* workers (and the last frames) compressing, summed */
    double write_seconds;      /* workers writing and committing packs to the repository */
    double worker_idle_seconds; /* workers waiting for frames to compress, summed */
    unsigned workers;          /* compression workers */
    double drain_wait_seconds; /* the part of queue_wait spent at file ends (a file's frames
                                * stored before its record is added), not on a full queue */
    double reader_cpu_seconds; /* CPU (user + sys) of the reading thread during the scan */
    double worker_cpu_seconds; /* CPU (user + sys) of the compression workers, summed */
    uint64_t bytes_read;       /* read by the scan: the per-GB figures' denominator */
    /* The scanner's check thread runs the page checks (engine/scan/scan_check.c): page_work and
     * queue_wait above are its time, not the reading thread's. */
    double check_seconds;      /* the check thread in the callbacks, queue waits included */
    double check_wait_seconds; /* the reading thread waiting for the checks */
    double check_cpu_seconds;  /* CPU (user + sys) of the check thread */
    /* The backup's steps end to end, wall seconds, so its fixed costs show (a small
     * incremental spends most of its time outside the scan). */
    double connect_seconds;    /* the repository lock, the connection, the server's facts */
    double plan_seconds;       /* earlier runs cleaned up, identity, plan, catalog, scanner */
    double start_seconds;      /* pg_backup_start: the checkpoint wait */
    double prepare_seconds;    /* the skip rule's horizon (one reading of the server's clock),
                                * the read plan, pack writers and workers started */
    double walk_seconds;       /* listing the data directory (part of scan_seconds) */
    double stop_seconds;       /* pg_backup_stop, backup_label, packs finished, database list */
    double wal_wait_seconds;   /* the WAL from start to stop found in the repository */
    double commit_seconds;     /* names made durable, the manifest committed */
    double exit_seconds;       /* the chain record and local catalog updated, all freed */
    double total_seconds;      /* bk_run from entry to return */
} bk_stages;

/* Frames compressed at one zstd level (adaptive compression: --compress-adapt). */
typedef struct bk_level_use {
    int level;
    uint64_t frames;
    uint64_t raw_bytes;
    uint64_t stored_bytes;     /* frame headers and payloads as stored */
    double seconds;            /* compression time at this level */
} bk_level_use;
#define BK_LEVELS_MAX 32

/* What a backup did to stay out of the database's way: the report (--report JSON) and
 * the log read these fields; the *_applied texts are for people and never parsed. */
typedef struct bk_io_report {
    scan_io_stats scan;            /* the read controller's decisions (engine/scan/scan.h) */
    size_t read_size;              /* bytes per read request */
    unsigned depth_max;            /* buffers allocated: the in-flight ceiling */
    char io_class_applied[160];    /* "idle; scheduler mq-deadline honours it" */
    char cpu_priority_applied[160]; /* "workers SCHED_IDLE" */
    char cpu_weight_applied[400];  /* "cgroup <dir> cpu.shares 512" or why not */
    char cpu_cgroup[300];          /* the cgroup made for --cpu-weight ("" = none) */
    bool checkpoint_fast;          /* what pg_backup_start was asked for */
    double checkpoint_wait_seconds; /* how long pg_backup_start took */
    uint64_t repo_flushes;         /* fsync/fdatasync/sync_file_range waits on the repo */
    uint64_t repo_bytes_written;   /* bytes the repository writers wrote */
    double flushes_per_gb;         /* repo_flushes per GB written (0 when none written) */
    uint64_t peak_rss_bytes;       /* getrusage ru_maxrss at the end */
    uint64_t buffer_bytes;         /* read buffers + worker queues allocated */
    unsigned pipe_jobs;            /* compression queue: frame buffers of 1 MiB */
    bk_stages stages;              /* where the time went */
    char cpu_reader_applied[160];  /* the reading thread's CPU priority ("SCHED_IDLE") */
    bool compress_adapt;           /* --compress-adapt on: levels followed the queue */
    int level_ceiling;             /* --compress-level: the highest level used */
    int level_floor;               /* the lowest the adaptation may use */
    int level_final;               /* the level at the end */
    uint64_t level_downs, level_ups; /* the adaptation's steps */
    unsigned nlevels;              /* levels[0..nlevels): frames per level, by level */
    bk_level_use levels[BK_LEVELS_MAX];
    /* Page cache the reads left behind (engine/backup/backup_cache.c): bytes of the files read
     * that became resident while they were read (mincore before and after), and files. */
    uint64_t page_cache_left_bytes;
    uint64_t page_cache_files;
    uint64_t manifest_records_peak; /* file records held in memory at once (memory bounds) */
    uint64_t manifest_bytes_peak;  /* bytes of manifest held at once: chunks, index, records */
    uint64_t manifest_pending_peak; /* records waiting for their frames at once (at most
                                     * BK_PENDING_FILES, engine/backup/backup_internal.h) */
} bk_io_report;

typedef enum bk_checksum_policy { BK_CHECKSUM_WARN = 0, BK_CHECKSUM_FAIL = 1 } bk_checksum_policy;

/* How an incremental finds what changed (--incremental-mode; docs/GUIDE.md). */
typedef enum bk_incr_mode {
    BK_INCR_AUTO = 0, /* WAL-guided when possible, else file-level skip */
    BK_INCR_SCAN = 1, /* read and hash every page */
    BK_INCR_FILE = 2, /* skip relation segments whose size and mtime prove them unchanged */
    BK_INCR_WAL = 3,  /* file-level skip, then only the blocks the archived WAL names */
} bk_incr_mode;

/* What a running backup has done so far, for a progress display: bytes of data files
 * read against the bytes it plans to read, files, pages scanned and changed. */
typedef struct bk_progress {
    uint64_t bytes_done, bytes_total;
    uint64_t files_done, files_total;
    uint64_t pages_scanned, pages_changed;
    /* bytes_total is what the backup plans to read (after the skip decision, corrected file
     * by file by what was read); bytes_skipped the walk's bytes it plans not to read. */
    uint64_t bytes_skipped;
} bk_progress;

/* Called on the backup's own thread after each read chunk and each file. It must be
 * quick and must not call back into the engine; the engine itself prints nothing. */
typedef void (*bk_progress_fn)(void *ctx, const bk_progress *p);

typedef struct bk_opts {
    const char *pgdata;     /* data directory; NULL = the server's data_directory */
    const char *conninfo;   /* libpq connection string; NULL = PG* environment */
    const char *state_dir;  /* local catalog directory */
    char type;              /* 'F' full, 'I' incremental, 0 = automatic */
    size_t read_size;       /* 0 = automatic: the md stripe, 512 KiB on a single device */
    unsigned queue_depth;   /* 0 = automatic (scan_plan_io in engine/scan/scan.h) */
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
    bk_progress_fn progress; /* NULL: no progress calls */
    void *progress_ctx;
    /* Polite I/O (docs/DESIGN.md, "Polite I/O"); fields below are added, keep the order. */
    scan_io_class io_class;  /* --io-class: idle (default), best-effort, default */
    int io_level;            /* best-effort level 0..7 */
    bk_cpu_priority cpu_priority; /* --cpu-priority of the compression workers */
    unsigned cpu_weight;     /* --cpu-weight: a cgroup with this weight (0 = none) */
    bool checkpoint_fast;    /* --checkpoint fast; spread (false) is the default */
    uint64_t max_memory;     /* --max-memory: bound on the buffers (0 = unbounded) */
    bool compress_adapt;     /* --compress-adapt: step the level down while compression is
                              * behind the reads, back up to zstd_level when it idles */
    const char *annotations; /* --annotation: "key=value\n" lines for the manifest (NULL: none) */
} bk_opts;

#define BK_OPTS_INIT {NULL, NULL, NULL, 0, 0, 0, true, true, BK_CHECKSUM_WARN, 1, 0, 0, \
                      300, 256ull << 20, 0, 10, BK_INCR_AUTO, 7, 7 * 86400, NULL, NULL, \
                      SCAN_IO_IDLE, 7, BK_CPU_IDLE, 0, false, 0, true, NULL}

/* What one backup hands back. */
typedef struct bk_result {
    /* On success the committed manifest's header and counters without its file records
     * (the caller's: free with mf_free), so a summary needs no second download and the
     * run never holds every record; NULL on failure. */
    mf_manifest *manifest;
    bk_io_report io;        /* what was applied and counted (--report), also on failure */
    repo_requests requests; /* object-store requests of this backup (storage.h), also on
                             * failure */
    /* On success, when the plan read them: every backup's header in history order, this
     * one last (for the command's metrics, which then need no second listing; free with
     * chain_history_free). history_known false: not read (--type full). */
    chain_history history;
    bool history_known;
} bk_result;

/* Run one backup into r; *res is filled as bk_result says. */
int bk_run(repo *r, const bk_opts *opts, bk_result *res, pb_error *err);

/*
 * What `pageback check` proves (engine/backup/check.c) before the first backup (prefix ck_):
 * the data directory is the connected server's, archiving is on and pushes into this
 * repository, the archiver is not failing, the repository is initialized for this
 * cluster, writable and private, and one forced WAL segment makes the round trip from
 * the server into the repository within a bound.
 *
 * Each finding goes to a callback as it is made (the program prints it); a failed
 * finding names the setting at fault and its fix.
 */
typedef enum ck_status { CK_OK, CK_WARN, CK_FAIL, CK_SKIP } ck_status;

/* One finding: setting is what it is about ("archive_mode", "--pgdata", "repository"),
 * what says what was found, fix (NULL for CK_OK) what to do about it. */
typedef void (*ck_note_fn)(void *ctx, ck_status st, const char *setting, const char *what,
                           const char *fix);

/* What archive_command must name to archive into the checked repository. */
typedef struct ck_target {
    const char *repo;    /* the repository location (required) */
    const char *config;  /* --config of the check, or NULL */
    const char *cluster; /* --cluster of the check, or NULL */
} ck_target;

typedef struct ck_opts {
    const char *conninfo; /* libpq; NULL or "": the PG* environment */
    const char *pgdata;   /* NULL: the server's data_directory */
    ck_target target;
    unsigned archive_timeout_secs; /* the round trip's bound */
    ck_note_fn note;
    void *note_ctx;
} ck_opts;

/* Run every check that applies; r NULL when the repository could not be opened (the
 * caller noted why), then the checks that need it are skipped. *failures counts the
 * CK_FAIL findings. A non-zero return is a failure the checks could not go on after
 * (no connection): err says it, and it counts as one failure too. */
int ck_run(repo *r, const ck_opts *o, unsigned *failures, pb_error *err);

/* What archive_command does, as far as its text tells. */
typedef enum ck_cmd_verdict {
    CK_CMD_SAME,        /* pageback archive-push into the target */
    CK_CMD_ELSEWHERE,   /* pageback archive-push into another repository or cluster */
    CK_CMD_NOT_PAGEBACK,/* it does not run pageback archive-push at all */
    CK_CMD_UNKNOWN      /* it runs pageback archive-push, but where to cannot be told */
} ck_cmd_verdict;
/* Parse archive_command (PostgreSQL's %% read as %, then shell words). why: one line. */
ck_cmd_verdict ck_archive_command(const char *cmd, const ck_target *want, char *why,
                                  size_t cap);

/* Poll until WAL file name is in the archive or timeout_secs pass: *arrived says which;
 * a non-zero return is a repository failure. */
int ck_wait_archived(repo *r, const char *name, unsigned timeout_secs, bool *arrived,
                     pb_error *err);

/* The system identifier in pgdata's global/pg_control (its first field in every
 * version). */
int ck_pgdata_system_id(const char *pgdata, uint64_t *out, pb_error *err);

#endif
