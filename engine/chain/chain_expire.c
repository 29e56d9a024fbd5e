/*
 * engine/chain/chain_expire.c — what expire removes, and in which order.
 *
 * Three ways to choose, one at a time, as pgBackRest's expire: a count of fulls
 * (--retain-full, repo-retention-full), a window of days (--retain-full-days,
 * repo-retention-full-type=time) and one backup given up by hand (--set, which takes
 * the incrementals built on it along, as pgBackRest's expire --set does). Whatever is
 * chosen, the newest backup of the newest timeline stays (engine/chain/chain_order.c).
 * Then the WAL no kept backup needs goes. The caller holds the writer lock.
 */
#include "engine/chain/chain.h"

#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int plan_keep(const chain_history *h, const chain_expire_opts *o, bool *keep, pb_error *err)
{
    if (o->set)
        return plan_set(h, o->set, keep, err);
    unsigned count = o->retain_full;
    if (o->retain_full_days) {
        int64_t cutoff = o->now - (int64_t)o->retain_full_days * 86400;
        count = chain_retain_days_count(h, cutoff);
        if (o->out) {
            char when[40];
            time_t t = (time_t)cutoff;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S+00", &tm);
            fprintf(o->out, "retention window: fulls that stopped after %s, and the newest one "
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

static int expire_wal_plan(repo *r, const chain_history *h, const bool *keep,
                           const chain_expire_opts *o, pb_error *err)
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
    if (rc || !o->out)
        return rc;
    const char *verb = o->dry_run ? "would expire" : "expired";
    if (cut && cut != oldest)
        fprintf(o->out, "%s %" PRIu64 " WAL %s older than %s (start of backup %s, the oldest of "
               "the newest %u fulls with continuous WAL); older backups keep their own WAL, "
               "start to stop, and restore to their end only\n", verb, we.removed,
               pb_plural(we.removed, "segment", "segments"), we.cut, cut->id, o->retain_archive);
    else
        fprintf(o->out, "%s %" PRIu64 " WAL %s older than %s (start of backup %s)\n", verb, we.removed,
               pb_plural(we.removed, "segment", "segments"), we.cut, oldest->id);
    return 0;
}

/* The backups that go leave the record first (docs/FORMAT.md): a kill after that
 * leaves a backup whose manifest is still there, which the next record write lists
 * again and the next expire removes; never a listed backup without a manifest. */
static int unrecord(repo *r, const chain_history *hist, const bool *keep, pb_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < hist->count; i++)
        n += !keep[i];
    if (n == 0)
        return 0;
    char (*ids)[MF_ID_LEN] = calloc(n, sizeof(*ids));
    if (!ids)
        return pb_fail(err, PB_ENOMEM, "out of memory planning expire");
    n = 0;
    for (size_t i = 0; i < hist->count; i++)
        if (!keep[i])
            memcpy(ids[n++], hist->items[i].id, MF_ID_LEN);
    int rc = chain_record_update(r, NULL, (const char (*)[MF_ID_LEN])ids, n, err);
    free(ids);
    return rc;
}

/* A backup the record lists without a manifest lost it to damage: which backups it needs
 * (its parents) and which WAL is unknown, so nothing is removed until it is resolved. */
static int check_lost(repo *r, const chain_history *hist, pb_error *err)
{
    chain_record rec = {0};
    int rc = chain_record_load(r, &rec, err);
    for (size_t i = 0; rc == 0 && i < rec.count; i++)
        if (!chain_history_find(hist, rec.ids[i]))
            rc = pb_fail(err, PB_ESTATE, "backup %s is listed in %s/%s but its manifest "
                         "backup/%s/manifest is missing: expire removes nothing until it is "
                         "put back (verify reports it; to give the backup up, remove its "
                         "objects and both %s copies, which the next backup rebuilds from "
                         "the manifests present)", rec.ids[i], repo_location(r),
                         CHAIN_RECORD_KEY, rec.ids[i], CHAIN_RECORD_KEY);
    chain_record_free(&rec);
    return rc;
}

/* An incremental that goes with the backup --set names. */
static bool dependent(const chain_expire_opts *o, const mf_backup *b)
{
    return o->set && strcmp(o->set, b->id) != 0;
}

/* Retention follows history order and parentage (chain_retain): the newest N full or
 * synthetic backups (one state counted once), everything after the oldest of them, and
 * every ancestor a kept backup needs; a backup whose descendant is kept is never
 * removed, nor the newest backup of the newest timeline. When timeline branches
 * compete (which one the cluster lives on is not known), the newest of each stays. */
int chain_expire(repo *r, const chain_expire_opts *o, pb_error *err)
{
    chain_history hist = {0};
    bool *keep = NULL;
    int rc = chain_history_load(r, &hist, err);
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && chain_history_check(&hist, "retention", &cerr) != 0)
        pb_warn("%s; expire keeps the newest backup of both", cerr.msg);
    if (rc == 0)
        rc = check_lost(r, &hist, err);
    if (rc == 0 && !(keep = calloc(hist.count ? hist.count : 1, sizeof(*keep))))
        rc = pb_fail(err, PB_ENOMEM, "out of memory planning expire");
    if (rc == 0)
        rc = plan_keep(&hist, o, keep, err);
    if (rc == 0 && !o->dry_run)
        rc = unrecord(r, &hist, keep, err);
    /* Newest first: an incremental goes before the backups it needs, so a kill at any
     * moment leaves every listed backup with its whole chain. */
    for (size_t i = hist.count; rc == 0 && i-- > 0;) {
        if (keep[i])
            continue;
        if (!o->dry_run)
            rc = chain_drop(r, hist.items[i].id, err);
        bool dep = dependent(o, &hist.items[i]);
        if (rc == 0 && o->out)
            fprintf(o->out, "%s backup %s%s%s%s\n", o->dry_run ? "would expire" : "expired",
                   hist.items[i].id, dep ? " (built on " : "", dep ? o->set : "",
                   dep ? ", which --set removes)" : "");
        PB_FAULT_POINT("expire.after-backup");
    }
    if (rc == 0)
        rc = expire_wal_plan(r, &hist, keep, o, err);
    free(keep);
    chain_history_free(&hist);
    return rc;
}
