/*
 * engine/backup_skip.c — reading less (issue 11): the file-level skip rule, when a
 * verify scan is due, and which method an incremental uses.
 *
 * The skip rule is pgBackRest's, measured on the database server's clock. At its start
 * every backup records the server's second S and waits until the server's clock has
 * passed S + 1 before the walk (backup.c), and stores S as its mtime horizon. Any write
 * to a file after that backup walked it happens at or after S + 1, so even with the
 * kernel's coarse timestamps (a few ms behind) the file's mtime becomes >= S. A segment
 * whose mtime is still the one that backup recorded, and lies before S, therefore has not
 * been written since it was read: its page hashes and locations carry forward exactly as
 * an unchanged file's do, and restore cannot tell the difference. Anything that makes the
 * mtime untrustworthy (it moved backwards, lies in the future, the size changed under an
 * equal mtime, the file was replaced) forces a read. The full hash scan stays the truth:
 * a verify scan reads everything and counts what the cheaper method would have missed
 * (docs/DESIGN.md, "How the cost follows the change").
 */
#include "engine/backup_internal.h"
#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
    if (cur->mtime == prev->mtime && cur->size != prev->size)
        return BK_READ_SIZE_SAME_MTIME;
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
static bool read_every_page(const mf_backup *h)
{
    return h->type != 'I' || h->verify_scan || h->read_mode == 0 ||
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
        snprintf(why, why_len, "%u incrementals since the last full scan (--verify-scan %u)",
                 cheap, every);
        return true;
    }
    if (after_secs && cheap && now - scanned_at >= after_secs) {
        snprintf(why, why_len, "the last full scan is older than --verify-scan %" PRId64 " s",
                 after_secs);
        return true;
    }
    return false;
}

/* Why the WAL-guided method cannot be used for this backup; NULL when it can. The
 * decoder is not merged yet (issue 11, part 3): every such backup falls back. */
static const char *wal_unavailable(const bk_ctx *ctx)
{
    (void)ctx;
    return "the WAL block-reference decoder is not built into this version";
}

static void say_mode(const bk_ctx *ctx, const char *what, const char *why)
{
    pb_info("incremental reads %s%s%s%s", what, why ? " (" : "", why ? why : "",
            why ? ")" : "");
    if (ctx->verify)
        pb_info("verify scan: every page is read and hashed; a change the cheaper method "
                "misses is shipped and reported");
}

void bk_choose_read(bk_ctx *ctx, const chain *plan_chain, bool parent_is_head)
{
    mf_backup *h = mf_header(ctx->m);
    const bk_opts *o = ctx->opts;
    ctx->skip_on = false;
    ctx->verify = false;
    h->read_mode = MF_READ_SCAN;
    if (h->type != 'I' || !ctx->parent || o->incr_mode == BK_INCR_SCAN) {
        if (h->type == 'I')
            say_mode(ctx, "every page", "--incremental-mode scan");
        return;
    }
    const mf_backup *ph = mf_header_c(ctx->parent);
    if (!parent_is_head || ph->timeline != h->timeline || ph->mtime_horizon <= 0) {
        say_mode(ctx, "every page", !parent_is_head ? "the parent is not the chain head"
                 : ph->timeline != h->timeline ? "the timeline changed"
                 : "the parent backup recorded no mtime horizon (an older version made it)");
        return;
    }
    char why[160];
    if (bk_verify_due(plan_chain, o->verify_every, o->verify_after_secs, ctx->server_start,
                      why, sizeof(why))) {
        ctx->verify = true;
        h->verify_scan = true;
        pb_info("verify scan due: %s", why);
    }
    ctx->skip_on = true;
    h->read_mode = MF_READ_FILE;
    const char *nowal = wal_unavailable(ctx);
    if (o->incr_mode == BK_INCR_FILE)
        say_mode(ctx, "segments whose size or mtime moved", "--incremental-mode file");
    else if (nowal && o->incr_mode == BK_INCR_WAL)
        pb_warn("--incremental-mode wal: falling back to the file-level skip for the whole "
                "backup: %s", nowal);
    else
        say_mode(ctx, "segments whose size or mtime moved", nowal);
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
        pb_info("file-level skip: %" PRIu64 " relation segments would have been skipped "
                "(read for the verify scan); read anyway: %s", ctx->verdicts[BK_SKIP],
                n ? reads : "none");
    else
        pb_info("file-level skip: %" PRIu64 " relation segments (%.1f MiB) skipped; read: %s",
                h->files_skipped, h->bytes_skipped / 1048576.0, n ? reads : "none");
    if (ctx->verify && h->pages_missed)
        pb_log(PB_LOG_ERROR, "verify scan: %" PRIu64 " changed pages the file-level skip "
               "would have missed were shipped: this is a bug, please report it",
               h->pages_missed);
    else if (ctx->verify)
        pb_info("verify scan: the file-level skip missed no changed page");
}
