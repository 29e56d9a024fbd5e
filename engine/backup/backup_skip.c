/*
 * engine/backup/backup_skip.c — reading less: the file-level skip rule, when a
 * verify scan is due, and which method an incremental uses.
 *
 * The skip rule is pgBackRest's, measured on the database server's clock. At its start
 * every backup reads the server's second S before the walk (backup.c) and stores S - 1
 * as its mtime horizon. Any write to a file after that backup walked it happens at or
 * after S, so even with the kernel's coarse timestamps (a few ms behind) the file's mtime
 * becomes >= S - 1 (pgBackRest waits for S + 1 and keeps S instead: the same margin, paid
 * in time rather than in the files of the second before). A segment
 * whose mtime is still the one that backup recorded, and lies before S, therefore has not
 * been written since it was read: its page hashes and locations carry forward exactly as
 * an unchanged file's do, and restore cannot tell the difference. Anything that makes the
 * mtime untrustworthy (it moved backwards, lies in the future, the size changed under an
 * equal mtime, the file was replaced) forces a read. The full hash scan stays the truth:
 * a verify scan reads everything and counts what the cheaper method would have missed
 * (docs/DESIGN.md, "How the cost follows the change").
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_identity_internal.h"
#include "engine/backup/backup_skip_internal.h"
#include "common/fault.h"
#include "engine/wal/wal.h"

#include <stdlib.h>
#include <unistd.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define RELSEG_PAGES 131072u /* RELSEG_SIZE: a relation segment of 1 GiB in 8 kB pages */

_Static_assert(BK_SKIP_NVERDICTS == BK_READ_RECENT + 1, "one count per verdict");

bk_skip_verdict bk_skip_decide(const bk_skip_stat *cur, const bk_skip_stat *prev,
                               int64_t parent_horizon, int64_t now)
{
    if (!prev)
        return BK_READ_NEW;
    if (parent_horizon <= 0)
        return BK_READ_NO_HORIZON;
    if (cur->inode && prev->inode && cur->inode != prev->inode)
        return BK_READ_INODE;
    if (cur->mtime > now)
        return BK_READ_MTIME_FUTURE;
    if (cur->mtime < prev->mtime)
        return BK_READ_MTIME_BACKWARDS;
    /* mtimes are whole seconds: a file grown in the parent's last second after its walk
     * keeps that second, as normal as any recent write. Only an older mtime with another
     * size says the metadata lies (a copy that kept the mtime). */
    if (cur->mtime == prev->mtime && cur->size != prev->size)
        return cur->mtime >= parent_horizon ? BK_READ_RECENT : BK_READ_SIZE_SAME_MTIME;
    if (cur->mtime != prev->mtime || cur->size != prev->size)
        return BK_READ_CHANGED;
    if (cur->mtime >= parent_horizon)
        return BK_READ_RECENT;
    return BK_SKIP;
}

const char *bk_skip_verdict_name(bk_skip_verdict v)
{
    static const char *const names[BK_SKIP_NVERDICTS] = {
        "unchanged", "new", "parent has no mtime horizon", "inode changed",
        "mtime in the future", "mtime moved backwards", "size changed with an equal mtime",
        "changed", "changed too recently before the parent"};
    return (unsigned)v < BK_SKIP_NVERDICTS ? names[v] : "?";
}

/* Did this backup read and hash every page? */
/* A synthetic full ('S', rebase) read nothing itself: it carries the read mode of the
 * newest backup it folds in, so it counts as a full scan only when that one was; else it
 * counts as one cheap backup, and with the chain ending there the last full scan's time
 * is unknown (a --verify-scan DURATION is then due at once). */
static bool read_every_page(const mf_backup *h)
{
    return h->type == 'F' || h->verify_scan || h->read_mode == 0 ||
           h->read_mode == MF_READ_SCAN;
}

bool bk_verify_due(const chain *c, unsigned every, int64_t after_secs, int64_t now,
                   char *why, size_t why_len)
{
    unsigned cheap = 0;
    int64_t scanned_at = 0;
    for (size_t i = c->count; i-- > 0;) {
        const mf_backup *h = mf_header_c(c->items[i]);
        if (read_every_page(h)) {
            scanned_at = h->start_time;
            break;
        }
        cheap++;
    }
    char sink[8];
    if (!why) {
        why = sink;
        why_len = sizeof(sink);
    }
    if (every && cheap + 1 >= every) {
        snprintf(why, why_len, "%u %s since the last full scan (--verify-scan %u)", cheap,
                 pb_plural(cheap, "incremental", "incrementals"), every);
        return true;
    }
    if (after_secs && cheap && now - scanned_at >= after_secs) {
        snprintf(why, why_len, "the last full scan is older than --verify-scan %" PRId64 " s",
                 after_secs);
        return true;
    }
    return false;
}

/* Why WAL cannot vouch for this backup before anything is decoded; NULL when it may. */
static const char *wal_unavailable(const bk_ctx *ctx)
{
    /* From a hot standby the window is the primary's WAL as the standby replayed it: the
     * archive (fed by the primary, or by the standby with archive_mode = always) holds it
     * up to this start, the segment holding the start is in the standby's pg_wal, and a
     * standby with checksums or wal_log_hints never writes a hint bit without WAL (it
     * leaves such pages clean in recovery). So nothing here differs from a primary. */
    if (ctx->wal_minimal)
        return "wal_level is minimal: WAL does not log every change";
    if (!ctx->checksums && !ctx->wal_log_hints)
        return "hint bits are not WAL-logged (no data checksums, wal_log_hints off): "
               "harmless to a restore, but WAL cannot vouch for those pages";
    return NULL;
}

/* pg_backup_start switched WAL just now: the segment before the start's is being
 * archived. The archiver goes in order, so once it is there every earlier one is or
 * never will be (a gap, found while decoding). 1 = not there in time. */
static int wait_archived(bk_ctx *ctx, uint64_t segno, pb_error *err)
{
    const mf_backup *h = mf_header_c(ctx->m);
    char name[25];
    arch_segment_name(name, h->timeline, segno, h->wal_segment_size);
    double deadline = pb_now() + ctx->opts->wal_timeout_secs;
    for (;;) {
        bool present = false;
        int rc = arch_exists(ctx->repo, name, &present, err);
        if (rc || present)
            return rc;
        if (pb_now() > deadline)
            return 1;
        if ((rc = repo_lock_renew(ctx->lock, err)))
            return rc;
        usleep(50000);
    }
}

/* Decode the window [parent's start, this start); NULL set with why filled to fall back. */
static int wal_guide(bk_ctx *ctx, char *why, size_t why_len, pb_error *err)
{
    const mf_backup *h = mf_header_c(ctx->m), *ph = mf_header_c(ctx->parent);
    uint64_t seg = h->start_lsn / h->wal_segment_size;
    if (h->start_lsn < ph->start_lsn) {
        /* A standby's restartpoint before the parent's start (bk_standby_before_start
         * waits past the parent's end, so it should not happen): no window to decode. */
        snprintf(why, why_len, "this backup starts before its parent");
        return 0;
    }
    if (seg > ph->start_lsn / h->wal_segment_size) {
        int rc = wait_archived(ctx, seg - 1, err);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            snprintf(why, why_len, "the WAL segment before the start was not archived within "
                     "%u s (--wal-timeout)", ctx->opts->wal_timeout_secs);
            return 0;
        }
    }
    wg_window w = {ctx->repo, ctx->pgdata, ctx->opts->state_dir, h->timeline,
                   h->wal_segment_size, ph->start_lsn, h->start_lsn, 0, 19};
    return wg_collect(&w, &ctx->wal, why, why_len, err);
}

/* A block of the server's WAL summaries into the block set: a limit block (the fork was
 * truncated or created from there; rel 0: a database created) marks it for a whole read,
 * as the decoder's smgr and CREATE DATABASE records do. */
static int summary_block(void *vset, const pgc_summary_block *b, pb_error *err)
{
    wg_set *set = vset;
    if (b->limit && b->rel == 0)
        return wg_set_mark_db(set, b->spc, b->db, err);
    if (b->limit)
        return wg_set_mark_rel(set, b->spc, b->db, b->rel, err);
    wg_key k = {b->spc, b->db, b->rel, b->fork, b->block / RELSEG_PAGES};
    return wg_set_add(set, &k, b->block % RELSEG_PAGES, err);
}

/* PostgreSQL 17 on: the window [parent's start, this start) from the server's WAL
 * summaries, when they cover it (nothing to decode). NULL set with why filled to go on
 * with the WAL decoder. */
static int summary_guide(bk_ctx *ctx, char *why, size_t why_len, pb_error *err)
{
    const mf_backup *h = mf_header_c(ctx->m), *ph = mf_header_c(ctx->parent);
    if (!ctx->conn || !ctx->facts || !ctx->facts->wal_summaries) {
        snprintf(why, why_len, "the server keeps no WAL summaries");
        return 0;
    }
    if (h->start_lsn < ph->start_lsn) {
        snprintf(why, why_len, "this backup starts before its parent");
        return 0;
    }
    wg_set *set = NULL;
    int rc = wg_set_open(&set, ctx->opts->state_dir, 0, err);
    if (rc == 0)
        rc = pgc_wal_summary_blocks(ctx->conn, h->timeline, ph->start_lsn, h->start_lsn,
                                    ctx->opts->wal_timeout_secs, summary_block, set, why,
                                    why_len, err);
    if (rc == 0)
        rc = wg_set_finish(set, err);
    if (rc == 0)
        ctx->wal = set;
    else
        wg_set_free(set);
    if (rc == PB_EPG) {
        /* The server refused (e.g. a role without EXECUTE on the summary functions): the
         * session is still good and the WAL decoder can do the same work. */
        snprintf(why, why_len, "the server's WAL summaries could not be read: %s", err->msg);
        *err = (pb_error)PB_ERROR_INIT;
        return 0;
    }
    return rc < 0 ? rc : 0;
}

static void say_mode(const bk_ctx *ctx, const char *what, const char *why)
{
    pb_detail("incremental reads %s%s%s%s", what, why ? " (" : "", why ? why : "",
            why ? ")" : "");
    if (ctx->verify)
        pb_detail("verify scan: every page is read and hashed; a change the cheaper method "
                "misses is shipped and reported");
}

int bk_choose_read(bk_ctx *ctx, const chain *plan_chain, bool parent_is_head, pb_error *err)
{
    mf_backup *h = mf_header(ctx->m);
    const bk_opts *o = ctx->opts;
    ctx->skip_on = false;
    ctx->verify = false;
    h->read_mode = MF_READ_SCAN;
    if (h->type != 'I' || !ctx->parent || o->incr_mode == BK_INCR_SCAN) {
        if (h->type == 'I')
            say_mode(ctx, "every page", "--incremental-mode scan");
        return 0;
    }
    const mf_backup *ph = mf_header_c(ctx->parent);
    if (!parent_is_head || ph->timeline != h->timeline || ph->mtime_horizon <= 0) {
        const char *why = !parent_is_head ? "the parent is not the chain head"
                          : ph->timeline != h->timeline ? "the timeline changed"
                          : "the parent backup recorded no mtime horizon (an older version "
                            "made it)";
        bk_set_read_why(h, why);
        say_mode(ctx, "every page", why);
        return 0;
    }
    char why[1200];
    uint64_t hist = 0;
    bool hist_ok = bk_history_hash(ctx->pgdata, ctx->ctl_now.timeline, &hist);
    if (!bk_control_follows(ph, &ctx->ctl_now, hist_ok ? &hist : NULL, why, sizeof(why))) {
        /* Pages may have been rewritten where WAL cannot see it, and a copy keeps mtimes:
         * neither WAL nor the file-level skip can vouch, every page is read and diffed by
         * hash. */
        pb_warn("pg_control does not follow the parent's stop point: %s; reading every "
                "page by hash", why);
        bk_set_read_why(h, why);
        say_mode(ctx, "every page", "pg_control does not follow the parent's stop point");
        return 0;
    }
    if (bk_verify_due(plan_chain, o->verify_every, o->verify_after_secs, ctx->server_start,
                      why, sizeof(why))) {
        ctx->verify = true;
        h->verify_scan = true;
        pb_info("verify scan due: %s", why);
    }
    ctx->skip_on = true;
    h->read_mode = MF_READ_FILE;
    if (o->incr_mode == BK_INCR_FILE) {
        say_mode(ctx, "segments whose size or mtime moved", "--incremental-mode file");
        return 0;
    }
    const char *nowal = wal_unavailable(ctx);
    if (!nowal && ctx->facts && ctx->facts->wal_summaries) {
        int rc = summary_guide(ctx, why, sizeof(why), err);
        if (rc)
            return rc;
        if (ctx->wal) {
            h->read_mode = MF_READ_SUMMARY;
            say_mode(ctx, "the blocks the server's WAL summaries name, in segments whose size "
                     "or mtime moved", NULL);
            return 0;
        }
        pb_info("WAL summaries not used: %s; decoding the archived WAL instead", why);
    }
    if (!nowal) {
        int rc = wal_guide(ctx, why, sizeof(why), err);
        if (rc)
            return rc;
        nowal = ctx->wal ? NULL : why;
    }
    if (ctx->wal) {
        h->read_mode = MF_READ_WAL;
        say_mode(ctx, "the blocks the archived WAL names, in segments whose size or mtime "
                 "moved", NULL);
    } else {
        pb_warn("WAL-guided reads fall back to the file-level skip for the whole backup: %s",
                nowal);
        bk_set_read_why(h, nowal);
        say_mode(ctx, "segments whose size or mtime moved", NULL);
    }
    return 0;
}

int64_t bk_server_now(const bk_ctx *ctx)
{
    return ctx->server_start + (int64_t)(pb_now() - ctx->local_start) + 1;
}

bk_skip_verdict bk_skip_file(bk_ctx *ctx, const walk_entry *e, const mf_file *prev)
{
    bk_skip_stat cur = {e->size, e->mtime, e->inode}, old = {0, 0, 0};
    if (prev && prev->kind == MF_REL) {
        old.size = prev->size;
        old.mtime = prev->mtime;
        old.inode = prev->inode;
    }
    bk_skip_verdict v = bk_skip_decide(&cur, prev && prev->kind == MF_REL ? &old : NULL,
                                       mf_header_c(ctx->parent)->mtime_horizon,
                                       bk_server_now(ctx));
    if (v == BK_READ_CHANGED && pb_fault_fires("backup.skip-miss")) {
        pb_warn("test fault backup.skip-miss: treating changed %s as unchanged", e->path);
        v = BK_SKIP;
    }
    ctx->verdicts[v]++;
    if (v != BK_SKIP && v != BK_READ_CHANGED && v != BK_READ_NEW)
        pb_debug("%s is read: %s", e->path, bk_skip_verdict_name(v));
    return v;
}

/* The named blocks of e's segment, bounded by its size; its size when WAL cannot vouch
 * for it or the set is spilled (a lookup there reads a file). */
static uint64_t planned_guided(const bk_ctx *ctx, const walk_entry *e)
{
    wg_key k;
    uint32_t *blocks = NULL;
    size_t n = 0;
    pb_error err = PB_ERROR_INIT;
    if (wg_set_spilled(ctx->wal) || !wg_key_from_path(e->path, ctx->tblspc_dir, &k) ||
        k.fork != 0 || wg_set_blocks(ctx->wal, &k, &blocks, &n, &err) != 0)
        return e->size;
    free(blocks);
    uint64_t est = (uint64_t)n * PB_PAGE_SIZE;
    return est < e->size ? est : e->size;
}

uint64_t bk_planned_read(const bk_ctx *ctx, const walk_entry *e)
{
    if (e->kind != WALK_REL)
        return e->kind == WALK_FILE ? e->size : 0;
    if (!ctx->parent || ctx->verify || !ctx->skip_on)
        return e->size;
    /* Not modified since before the parent's horizon: the parent recorded this mtime,
     * so the skip rule will skip it (a file new since the parent with an old mtime is the
     * exception, corrected once it is read). */
    int64_t horizon = mf_header_c(ctx->parent)->mtime_horizon;
    if (horizon > 0 && e->mtime < horizon && e->mtime <= bk_server_now(ctx))
        return 0;
    return ctx->wal ? planned_guided(ctx, e) : e->size;
}

void bk_report_read(const bk_ctx *ctx)
{
    const mf_backup *h = mf_header_c(ctx->m);
    if (!ctx->skip_on)
        return;
    char reads[512];
    size_t n = 0;
    reads[0] = '\0';
    for (unsigned v = 1; v < BK_SKIP_NVERDICTS && n < sizeof(reads); v++)
        if (ctx->verdicts[v])
            n += (size_t)snprintf(reads + n, sizeof(reads) - n, "%s%" PRIu64 " %s",
                                  n ? ", " : "", ctx->verdicts[v],
                                  bk_skip_verdict_name((bk_skip_verdict)v));
    if (ctx->verify)
        pb_detail("file-level skip: %" PRIu64 " relation %s would have been skipped (read "
                  "for the verify scan); read anyway: %s", ctx->verdicts[BK_SKIP],
                  pb_plural(ctx->verdicts[BK_SKIP], "segment", "segments"), n ? reads : "none");
    else
        pb_detail("file-level skip: %" PRIu64 " relation %s (%.1f MiB) skipped; read: %s",
                  h->files_skipped, pb_plural(h->files_skipped, "segment", "segments"),
                  h->bytes_skipped / 1048576.0, n ? reads : "none");
    if (ctx->wal)
        pb_detail("WAL-guided: %" PRIu64 " %s read by their named blocks only, %" PRIu64
                  " read whole (not a main fork, or created, truncated or copied in the window)",
                  ctx->wal_guided, pb_plural(ctx->wal_guided, "segment", "segments"),
                  ctx->wal_whole);
    if (ctx->verify && h->pages_missed)
        pb_log(PB_LOG_ERROR, "verify scan: %" PRIu64 " changed pages the cheaper read "
               "method would have missed were shipped: this is a bug, please report it",
               h->pages_missed);
    else if (ctx->verify)
        pb_detail("verify scan: the cheaper read method missed no changed page");
}

int64_t bk_mtime_horizon(int64_t server_second)
{
    return server_second - 1;
}
