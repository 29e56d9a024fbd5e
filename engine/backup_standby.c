/*
 * engine/backup_standby.c — what a backup from a hot standby adds to one from a primary,
 * and the database list every backup records (for restore --db-include).
 *
 * On a standby, PostgreSQL 15's non-exclusive pg_backup_start/pg_backup_stop work on the
 * session as on a primary (docs/DESIGN.md rule 1), with three differences this file
 * handles:
 * - The start point is the REDO of the standby's latest restartpoint, and the end is
 *   the standby's minimum recovery point (pg_backup_stop returns it and its timeline is
 *   min_recovery_end_timeline), not a WAL record the backup wrote. A standby cannot
 *   switch WAL segments: the segment holding the end is archived when the primary
 *   finishes it (archive_timeout bounds that), by the primary's archive_command or the
 *   standby's with archive_mode = always. backup.c waits for it as for any backup
 *   (rule 4); its timeout message says so.
 * - A standby can replay a timeline switch during the backup (its upstream was
 *   promoted): the WAL from start to end would then span two timelines, so the backup
 *   is refused and is to be taken again, on the new timeline (a new chain, as after any
 *   promotion).
 * - A standby lags its primary: an incremental from a standby on top of a primary's
 *   backup must not end before its parent does, or "latest" (which follows stop LSNs,
 *   rule 9) would name the parent as newer than its child. The standby is first given
 *   time to replay past the parent's end, and a backup that still ends before it is
 *   refused.
 */
#include "engine/backup_internal.h"
#include "engine/envelope.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The "START TIMELINE: N" line of a backup_label; 0 when it has none. */
static uint32_t label_start_timeline(const char *label)
{
    const char *p = strstr(label, "\nSTART TIMELINE: ");
    unsigned long tli = p ? strtoul(p + strlen("\nSTART TIMELINE: "), NULL, 10) : 0;
    return tli <= UINT32_MAX ? (uint32_t)tli : 0;
}

int bk_standby_before_start(bk_ctx *ctx, pgc *conn, pb_error *err)
{
    if (!ctx->standby || !ctx->prev_stop_lsn)
        return 0;
    double deadline = pb_now() + ctx->opts->wal_timeout_secs;
    char want[32], at[32];
    pb_lsn_format(ctx->prev_stop_lsn, want);
    for (;;) {
        uint64_t replayed = 0;
        int rc = pgc_replay_lsn(conn, &replayed, err);
        if (rc)
            return rc;
        if (replayed >= ctx->prev_stop_lsn)
            return 0;
        pb_lsn_format(replayed, at);
        if (pb_now() > deadline)
            return pb_fail(err, PB_ESTATE, "the standby has replayed WAL up to %s only, not "
                           "past %s where the parent backup ends, after %u s: an incremental "
                           "from it would end before its parent", at, want,
                           ctx->opts->wal_timeout_secs);
        if ((rc = repo_lock_renew(ctx->lock, err)))
            return rc;
        pb_debug("waiting for the standby to replay past %s (at %s)", want, at);
        usleep(100000);
    }
}

int bk_standby_after_stop(bk_ctx *ctx, pgc *conn, const char *label, pb_error *err)
{
    mf_backup *h = mf_header(ctx->m);
    char stop[32], parent[32];
    uint32_t tli = label_start_timeline(label);
    if (tli && tli != h->timeline)
        return pb_fail(err, PB_ESTATE, "backup %s: backup_label says START TIMELINE %u, the "
                       "server's checkpoint said %u (a promotion while it started): take the "
                       "backup again", h->id, tli, h->timeline);
    if (!ctx->standby)
        return 0;
    int rc = pgc_recovery_timeline(conn, &tli, err);
    if (rc)
        return rc;
    pb_lsn_format(h->stop_lsn, stop);
    if (tli != h->timeline)
        return pb_fail(err, PB_ESTATE, "backup %s from a standby started on timeline %u and "
                       "ended at %s on timeline %u (the standby followed a promotion): take "
                       "the backup again", h->id, h->timeline, stop, tli);
    pb_lsn_format(ctx->prev_stop_lsn, parent);
    if (h->stop_lsn < ctx->prev_stop_lsn)
        return pb_fail(err, PB_ESTATE, "backup %s from a standby ends at %s, before its "
                       "parent %s ends (%s): the standby has not flushed what it replayed; "
                       "take the backup again", h->id, stop, h->parent, parent);
    pb_info("backup %s from a standby ends at %s on timeline %u (its minimum recovery "
            "point)", h->id, stop, tli);
    return 0;
}

/* backup/<id>/databases: the name -> OID list restore --db-include maps names with.
 * Read from pg_database on the backup's own session after pg_backup_stop, so that a
 * database created while files were read is named too; an object beside the manifest
 * (docs/FORMAT.md) so the manifest format stays as it is. */
int bk_put_databases(bk_ctx *ctx, pgc *conn, pb_error *err)
{
    mf_dblist dbs = {0};
    pb_buf raw = {0}, obj = {0};
    const mf_backup *h = mf_header_c(ctx->m);
    char key[MF_ID_LEN + 64];
    chain_backup_dir(key, sizeof(key), h->id);
    strcat(key, "/databases");
    int rc = pgc_databases(conn, &dbs, err);
    if (rc == 0)
        rc = mf_dblist_encode(&dbs, &raw, err);
    if (rc == 0)
        rc = pack_envelope_encode(raw.data, raw.len, MF_DBLIST_MAGIC, ctx->opts->zstd_level,
                                  key, &obj, err);
    if (rc == 0)
        rc = repo_put(ctx->repo, key, obj.data, obj.len, err);
    if (rc == 0)
        pb_debug("%s: %zu databases", key, dbs.count);
    mf_dblist_free(&dbs);
    pb_buf_free(&raw);
    pb_buf_free(&obj);
    return rc;
}
