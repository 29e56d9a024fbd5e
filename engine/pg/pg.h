/*
 * engine/pg/pg.h — the pg/ room: what pageback asks of the running PostgreSQL and reads
 * of its data directory. The session a backup holds open (prefix pgc_; only this room
 * includes <libpq-fe.h>) and, below, the data-directory walk (prefix walk_).
 */
#ifndef PB_ENGINE_PG_H
#define PB_ENGINE_PG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/pb.h"
#include "engine/pgver/pgver.h"
#include "manifest/manifest.h"

typedef struct pgc pgc;

typedef struct pgc_info {
    int server_version;       /* e.g. 150020 */
    const pgv_facts *facts;   /* the server's major (engine/pgver), never NULL */
    uint64_t system_id;       /* pg_control_system().system_identifier */
    bool data_checksums;      /* SHOW data_checksums */
    char data_directory[4096];/* SHOW data_directory */
    uint32_t wal_segment_size;/* bytes */
    uint32_t block_size;      /* must be 8192 */
    uint32_t catversion;      /* pg_control_system().catalog_version_no */
    char tblspc_dir[32];      /* "PG_15_202209061": this cluster's directory in a tablespace */
    bool in_recovery;
    char wal_level[16];       /* SHOW wal_level: "minimal", "replica", "logical" */
    bool wal_log_hints;       /* SHOW wal_log_hints */
} pgc_info;

/* conninfo may be NULL or "" (then PG* environment variables apply). A server of a major
 * engine/pgver does not know is refused (PB_EUNSUPPORTED naming its version). */
int pgc_connect(pgc **out, const char *conninfo, pb_error *err);
void pgc_free(pgc *c);
int pgc_info_get(pgc *c, pgc_info *out, pb_error *err);
/* The server's current WAL position (a standby: what it has received) and the timeline
 * of its latest checkpoint, for the archive lag in --metrics-file. */
int pgc_current_wal(pgc *c, uint64_t *lsn, uint32_t *timeline, pb_error *err);

/* pg_backup_start(label, fast): fast asks for an immediate checkpoint, else the server
 * spreads it. Returns start LSN and its timeline. */
int pgc_backup_start(pgc *c, const char *label, bool fast, uint64_t *start_lsn,
                     uint32_t *timeline, pb_error *err);
/* pg_backup_stop(wait_for_archive := false); the caller checks the archive itself. On a
 * standby the stop LSN is its minimum recovery point. *label_out and *spcmap_out are
 * malloc'd (spcmap may be an empty string). */
int pgc_backup_stop(pgc *c, uint64_t *stop_lsn, char **label_out, char **spcmap_out,
                    pb_error *err);

/* The server's clock, whole unix seconds (floor of clock_timestamp()): the clock the
 * data files' mtimes follow, for the file-skip rule (docs/DESIGN.md, "Rooms and arrows"). */
int pgc_server_time(pgc *c, int64_t *out, pb_error *err);
/* ---- a backup from a hot standby (docs/DESIGN.md rule 1 holds there too) ---- */
/* pg_last_wal_replay_lsn(): how far a standby has replayed (PB_EPG on a primary). */
int pgc_replay_lsn(pgc *c, uint64_t *out, pb_error *err);
/* The timeline of a standby's minimum recovery point, which pg_backup_stop reports as the
 * backup's end on a standby (pg_control_recovery().min_recovery_end_timeline). */
int pgc_recovery_timeline(pgc *c, uint32_t *out, pb_error *err);
/* What the server's pg_control says now: the system identifier, the data checksum
 * version (0 = off) and the latest checkpoint (its LSN, REDO and timeline). */
typedef struct pgc_control {
    uint64_t system_id;
    uint32_t checksum_version;
    uint64_t checkpoint_lsn, redo_lsn;
    uint32_t timeline;
} pgc_control;
int pgc_control_get(pgc *c, pgc_control *out, pb_error *err);
/* Every database of the cluster (pg_database: OID and name), appended to out. */
int pgc_databases(pgc *c, mf_dblist *out, pb_error *err);
/* The one text value of a one-row, one-column query (NULL is an error), for pageback
 * check's settings and statistics. */
int pgc_query_text(pgc *c, const char *sql, char *out, size_t outsz, pb_error *err);

/* ---- WAL summaries (PostgreSQL 17 on, summarize_wal = on) ---- */
/* One row of pg_wal_summary_contents(): a block a summarized record touched, or with limit
 * set, the block from which the relation fork was truncated or (re)created (rel 0: every
 * relation of the database in that tablespace, as a CREATE DATABASE sets it). */
typedef struct pgc_summary_block {
    uint32_t spc, db, rel;
    uint8_t fork;
    uint32_t block;
    bool limit;
} pgc_summary_block;
typedef int (*pgc_summary_fn)(void *ctx, const pgc_summary_block *b, pb_error *err);
/* Hand fn every block the server's WAL summaries on timeline tli name for [start, end),
 * after waiting up to wait_secs for the summarizer to reach end. 0 = done; 1 = the
 * summaries cannot vouch for the window (a major without them, summarize_wal off, the
 * summarizer behind, a gap), why says which, nothing was handed to fn; < 0 = error (fn's
 * error stops the rows). Summaries may reach before start: more blocks, never fewer. */
int pgc_wal_summary_blocks(pgc *c, uint32_t tli, uint64_t start, uint64_t end,
                           unsigned wait_secs, pgc_summary_fn fn, void *ctx, char *why,
                           size_t why_len, pb_error *err);

/* How long a spread checkpoint may take: checkpoint_timeout x
 * checkpoint_completion_target, in seconds, with both settings as the server shows them. */
int pgc_checkpoint_spread(pgc *c, char *timeout, size_t tcap, char *target, size_t gcap,
                          double *seconds, pb_error *err);

/*
 * The data-directory walk (engine/pg/walk.c) and its exclusion rules (prefix walk_).
 * Exclusions match pg_basebackup (docs/DESIGN.md rule 5). Tablespaces are followed
 * through the pg_tblspc symlinks.
 */
typedef enum walk_kind {
    WALK_DIR = 0,
    WALK_REL = 1,  /* relation segment: page-diffed */
    WALK_FILE = 2, /* other regular file: stored whole */
    WALK_LINK = 3, /* symlink (pg_tblspc/<oid>) */
} walk_kind;

typedef struct walk_entry {
    char *path;        /* relative to PGDATA, e.g. "base/5/16384.1" */
    walk_kind kind;
    uint32_t mode;     /* st_mode & 07777 */
    uint64_t size;
    int64_t mtime;
    uint64_t inode;    /* st_ino: a file replaced under the same name gets a new one */
    char *link_target; /* WALK_LINK: absolute target directory */
    uint32_t segno;    /* WALK_REL: segment number from the ".N" suffix */
} walk_entry;

typedef struct walk_list {
    walk_entry *items;
    size_t count;
} walk_list;

/* Walk pgdata. The list is sorted by path, except that "global/pg_control" is
 * always last. Files that vanish during the walk are skipped. */
int walk_pgdata(const char *pgdata, walk_list *out, pb_error *err);
/* The same, taking from each tablespace (pg_tblspc/<oid>/) only the directory
 * tblspc_dir, this cluster's "PG_<major>_<catversion>" (pgc_info.tblspc_dir), as
 * pg_basebackup does: another cluster's directory in the same location is left out.
 * tblspc_dir NULL or "": every entry (walk_pgdata). */
int walk_pgdata_cluster(const char *pgdata, const char *tblspc_dir, walk_list *out,
                        pb_error *err);
void walk_list_free(walk_list *l);

/* Rules, exposed for unit tests. rel is a path relative to PGDATA. */
bool walk_is_excluded(const char *rel, bool is_dir);
/* Is rel a relation data file (page-diffed)? Sets *segno. Unlogged relations' non-init
 * forks and temp relations are excluded by walk_is_excluded, not here. */
bool walk_is_relation(const char *rel, uint32_t *segno);

#endif
