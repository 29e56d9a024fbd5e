/*
 * engine/backup/backup_standby.c — what a backup from a hot standby adds to one from a primary,
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
 * - The backup is not finished on WAL the standby has not applied: after pg_backup_stop
 *   its end is compared with pg_last_wal_replay_lsn() (bounded wait, then refused). The
 *   minimum recovery point never passes replay, so this holds today; pg_control, read
 *   last before the stop, carries a minimum recovery point at or before the end, which
 *   is where a restore of the backup becomes consistent.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_standby_internal.h"
#include "engine/pack/pack.h"
#include "common/fault.h"

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

/* Wait (bounded by --wal-timeout, renewing the writer lock) until the standby has replayed
 * up to lsn; *replayed is where it got, believed up to cap only (a test's stuck standby).
 * 0 with *replayed < lsn is a timeout, for the caller to name. */
static int wait_replayed(bk_ctx *ctx, pgc *conn, uint64_t lsn, uint64_t cap,
                         uint64_t *replayed, pb_error *err)
{
    double deadline = pb_now() + ctx->opts->wal_timeout_secs;
    char want[32], at[32];
    pb_lsn_format(lsn, want);
    for (;;) {
        int rc = pgc_replay_lsn(conn, replayed, err);
        if (rc == 0 && *replayed > cap)
            *replayed = cap;
        if (rc || *replayed >= lsn || pb_now() > deadline)
            return rc;
        if ((rc = repo_lock_renew(ctx->lock, err)))
            return rc;
        pb_lsn_format(*replayed, at);
        pb_debug("waiting for the standby to replay up to %s (at %s)", want, at);
        usleep(100000);
    }
}

int bk_standby_before_start(bk_ctx *ctx, pgc *conn, pb_error *err)
{
    if (!ctx->standby || !ctx->prev_stop_lsn)
        return 0;
    uint64_t replayed = 0;
    int rc = wait_replayed(ctx, conn, ctx->prev_stop_lsn, UINT64_MAX, &replayed, err);
    if (rc || replayed >= ctx->prev_stop_lsn)
        return rc;
    char want[32], at[32];
    pb_lsn_format(ctx->prev_stop_lsn, want);
    pb_lsn_format(replayed, at);
    return pb_fail(err, PB_ESTATE, "the standby has replayed WAL up to %s only, not past %s "
                   "where the parent backup ends, after %u s: an incremental from it would "
                   "end before its parent", at, want, ctx->opts->wal_timeout_secs);
}

/* The end is the standby's minimum recovery point, which PostgreSQL only moves to WAL it
 * has replayed, so replay is at or past it when pg_backup_stop returns; checked all the
 * same (a backup must not be finished on WAL its server has not applied), with a bounded
 * wait and an error naming both LSNs. */
static int check_replayed_end(bk_ctx *ctx, pgc *conn, const mf_backup *h, uint32_t tli,
                              pb_error *err)
{
    uint64_t replayed = 0;
    bool stuck = pb_fault_fires("backup.standby-replay-behind");
    int rc = wait_replayed(ctx, conn, h->stop_lsn, stuck ? h->stop_lsn - 1 : UINT64_MAX,
                           &replayed, err);
    char stop[32], at[32];
    pb_lsn_format(h->stop_lsn, stop);
    pb_lsn_format(replayed, at);
    if (rc == 0 && replayed < h->stop_lsn)
        return pb_fail(err, PB_ESTATE, "backup %s from a standby ends at %s, but the standby "
                       "has replayed WAL up to %s only after %u s: take the backup again",
                       h->id, stop, at, ctx->opts->wal_timeout_secs);
    if (rc == 0)
        pb_info("backup %s from a standby ends at %s on timeline %u (its minimum recovery "
                "point; replayed up to %s)", h->id, stop, tli, at);
    return rc;
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
    return check_replayed_end(ctx, conn, h, tli, err);
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
