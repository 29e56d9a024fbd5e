/*
 * tools/expire_plan.c — what expire keeps.
 *
 * Three ways to choose, one at a time, as pgBackRest's expire: a count of fulls
 * (--retain-full, repo-retention-full), a window of days (--retain-full-days,
 * repo-retention-full-type=time) and one backup given up by hand (--set, which takes
 * the incrementals built on it along, as pgBackRest's expire --set does). Whatever is
 * chosen, the newest backup of the newest timeline stays (engine/chain/chain_order.c).
 * The time a window is measured from is the clock, or PAGEBACK_TEST_RETENTION_NOW (unix
 * seconds): a test cannot wait days, so it moves "now" instead of the backups.
 */
#include "tools/expire_plan.h"

#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *expire_usage(const pb_options *o)
{
    int ways = (o->retain_full > 0) + (o->retain_full_days > 0) + (o->restore.set != NULL);
    if (ways == 0)
        return "expire needs --retain-full N, --retain-full-days D or --set ID";
    if (ways > 1)
        return "expire takes one of --retain-full, --retain-full-days and --set";
    return NULL;
}

static int64_t retention_now(void)
{
    const char *v = getenv("PAGEBACK_TEST_RETENTION_NOW"); /* tests only, see above */
    char *end;
    long long t = v && *v ? strtoll(v, &end, 10) : 0;
    return v && *v && !*end && t > 0 ? (int64_t)t : (int64_t)time(NULL);
}

/* Does b descend from (or is it) the backup with id? */
static bool built_on(const chain_history *h, const mf_backup *b, const char *id)
{
    for (size_t steps = 0; b && steps <= h->count; steps++) {
        if (!strcmp(b->id, id))
            return true;
        b = b->parent[0] ? chain_history_find(h, b->parent) : NULL;
    }
    return false;
}

static int plan_set(const chain_history *h, const char *id, bool *keep, pb_error *err)
{
    if (!chain_history_find(h, id))
        return pb_fail(err, PB_ENOENT, "expire --set %s: no such backup in the repository "
                       "(info lists them)", id);
    const mf_backup *newest = chain_history_newest(h);
    const mf_backup *rival = h->compete ? &h->items[h->off_path - 1] : NULL;
    for (size_t i = 0; i < h->count; i++) {
        const mf_backup *b = &h->items[i];
        keep[i] = !built_on(h, b, id);
        if (!keep[i] && (b == newest || b == rival))
            return pb_fail(err, PB_ESTATE, "expire --set %s refused: it would remove backup "
                           "%s, the newest backup of %s, which expire never removes (take "
                           "a newer backup first)", id, b->id,
                           b == newest ? "the newest timeline" : "a competing branch");
    }
    return 0;
}

int expire_plan(const chain_history *h, const pb_options *o, bool *keep, pb_error *err)
{
    if (o->restore.set)
        return plan_set(h, o->restore.set, keep, err);
    unsigned count = (unsigned)o->retain_full;
    if (o->retain_full_days) {
        int64_t cutoff = retention_now() - (int64_t)o->retain_full_days * 86400;
        count = chain_retain_days_count(h, cutoff);
        if (!o->quiet) {
            char when[40];
            time_t t = (time_t)cutoff;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S+00", &tm);
            printf("retention window: fulls that stopped after %s, and the newest one "
                   "before it (%u full%s kept)\n", when, count, count == 1 ? "" : "s");
        }
    }
    chain_retain(h, count, keep);
    return 0;
}

typedef struct wal_expire {
    repo *r;
    const chain_history *h;
    const bool *keep;
    char cut[25];    /* oldest segment kept continuous */
    uint64_t removed;
    bool dry_run;    /* count, remove nothing */
} wal_expire;

static bool kept_by_backup(const wal_expire *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->h->count; i++)
        if (ctx->keep[i] && chain_wal_in_backup(&ctx->h->items[i], name))
            return true;
    return false;
}

static int expire_wal(void *vctx, const char *key, uint64_t size)
{
    (void)size;
    wal_expire *ctx = vctx;
    const char *name = strrchr(key, '/');
    name = name ? name + 1 : key;
    if (strlen(name) < 24 || strstr(name, ".history"))
        return 0;
    /* Same or older timeline, a position before the cut, and none of a kept backup's own
     * (start to stop: each kept backup stays restorable to its end). */
    if (strncmp(name, ctx->cut, 8) <= 0 && strncmp(name + 8, ctx->cut + 8, 16) < 0 &&
        !kept_by_backup(ctx, name)) {
        if (!ctx->dry_run)
            chain_delete_object(ctx->r, key);
        ctx->removed++;
        PB_FAULT_POINT("expire.mid-wal");
    }
    return 0;
}

int expire_wal_plan(repo *r, const chain_history *h, const bool *keep, const pb_options *o,
                    pb_error *err)
{
    const mf_backup *oldest = NULL, *cut = NULL;
    for (size_t i = 0; i < h->count; i++)
        if (keep[i] && (!oldest || h->items[i].start_lsn < oldest->start_lsn))
            oldest = &h->items[i];
    if (!oldest)
        return 0;
    if (o->retain_archive)
        cut = chain_archive_start(h, keep, o->retain_archive);
    wal_expire we = {r, h, keep, "", 0, o->dry_run};
    snprintf(we.cut, sizeof(we.cut), "%s", (cut ? cut : oldest)->start_wal);
    int rc = 0;
    if (cut && cut != oldest && !o->dry_run) /* verify must know the gap is retention's */
        rc = chain_archive_mark(r, cut->start_wal, cut->id, err);
    if (rc == 0)
        rc = repo_list(r, "wal/", expire_wal, &we, err);
    if (rc || o->quiet)
        return rc;
    const char *verb = o->dry_run ? "would expire" : "expired";
    if (cut && cut != oldest)
        printf("%s %" PRIu64 " WAL %s older than %s (start of backup %s, the oldest of "
               "the newest %u fulls with continuous WAL); older backups keep their own WAL, "
               "start to stop, and restore to their end only\n", verb, we.removed,
               pb_plural(we.removed, "segment", "segments"), we.cut, cut->id, o->retain_archive);
    else
        printf("%s %" PRIu64 " WAL %s older than %s (start of backup %s)\n", verb, we.removed,
               pb_plural(we.removed, "segment", "segments"), we.cut, oldest->id);
    return 0;
}
