/*
 * restore/verify/verify.h — verify backups and the WAL archive without writing anything
 * (prefix rs_verify, helpers vfy_): one backup as its restore would read it, or the
 * whole repository with every frame read once.
 */
#ifndef PB_RESTORE_VERIFY_H
#define PB_RESTORE_VERIFY_H

#include "restore/restore.h"

/* Read every frame a backup needs and check every page hash, without writing; set is an
 * id, "latest" or NULL (latest). Also checks the WAL from its start to its stop. */
int rs_verify(repo *r, const char *set, unsigned jobs, rs_stats *stats, pb_error *err);

/* What rs_verify_repo found. */
typedef struct rs_verify_stats {
    size_t backups, backups_failed, problems;
    uint64_t frames_read, wal_segments, wal_history;
    double seconds;
    uint64_t manifest_peak; /* most manifest bytes one step held (a stream, a window, a merge) */
} rs_verify_stats;

/* One line of a verify report about backup id (NULL: the WAL archive): a problem (naming
 * the object), or, when problem is false, the summary of one backup. */
typedef void (*rs_verify_note)(void *ctx, const char *id, bool problem, const char *msg);

/* Verify the repository without writing. set NULL: every backup (its manifest, every
 * frame it stored, read once in the whole run, every page hash, and that its chain is
 * complete: each page and file of a restore has a source) and the whole WAL archive
 * (every object's checksum, each backup's WAL, gaps on each timeline from the oldest
 * backup's start, history files). set = an id or "latest": that backup's chain and the
 * WAL it needs (rs_verify). Every problem goes to note; 0 when there was none,
 * PB_ECORRUPT when there were (stats->problems), another code when verify could not
 * run (err). */
int rs_verify_repo(repo *r, const char *set, unsigned jobs, rs_verify_note note,
                   void *note_ctx, const rs_progress_hook *progress, rs_verify_stats *stats,
                   pb_error *err);

#endif
