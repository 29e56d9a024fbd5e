/* tools/repo_commands.c — expire: removes what retention no longer keeps (info: tools/info_command.c). */
#include "tools/commands.h"

#include "engine/wal/wal.h"
#include "engine/chain.h"
#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- expire ---- */

typedef struct wal_expire {
    repo *r;
    char oldest[25]; /* oldest start segment still needed */
    uint64_t removed;
    bool dry_run;    /* count, remove nothing */
} wal_expire;

static int expire_wal(void *vctx, const char *key, uint64_t size)
{
    wal_expire *ctx = vctx;
    const char *name = strrchr(key, '/');
    name = name ? name + 1 : key;
    if (strlen(name) < 24 || strstr(name, ".history"))
        return 0;
    /* Same or older timeline, and a position before the oldest retained start. */
    if (strncmp(name, ctx->oldest, 8) <= 0 && strncmp(name + 8, ctx->oldest + 8, 16) < 0) {
        if (!ctx->dry_run)
            chain_delete_object(ctx->r, key);
        ctx->removed++;
        PB_FAULT_POINT("expire.mid-wal");
    }
    return 0;
}

/* WAL older than the oldest start among the kept backups (by LSN, not by id). */
static int expire_wal_before(repo *r, const chain_history *hist, const bool *keep,
                             const pb_options *o, pb_error *err)
{
    const mf_backup *oldest = NULL;
    for (size_t i = 0; i < hist->count; i++)
        if (keep[i] && (!oldest || hist->items[i].start_lsn < oldest->start_lsn))
            oldest = &hist->items[i];
    if (!oldest)
        return 0;
    wal_expire we = {r, "", 0, o->dry_run};
    snprintf(we.oldest, sizeof(we.oldest), "%s", oldest->start_wal);
    int rc = repo_list(r, "wal/", expire_wal, &we, err);
    if (rc == 0 && !o->quiet)
        printf("%s %" PRIu64 " WAL segments older than %s (start of backup %s)\n",
               o->dry_run ? "would expire" : "expired", we.removed, we.oldest, oldest->id);
    return rc;
}

static int expire_locked(repo *r, const pb_options *o, pb_error *err);

/* Expire removes backups: it holds the repository's writer lock (storage.h) so that no
 * backup builds on a parent it is removing, and no rebase reads one. */
int cmd_expire(pb_options *o, cmd_outcome *res)
{
    if (o->retain_full <= 0) {
        return cmd_usage_error(res, "expire needs --retain-full N");
    }
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    repo_lock *lock = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = repo_lock_acquire(r, "expire", &lock, &err);
    /* What a killed backup, rebase or expire left goes first (as backup does it), so an
     * expire killed between a manifest and its packs is finished by the next one; that
     * failing does not block the expire. */
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && !o->dry_run && chain_cleanup(r, lock, &cerr) != 0)
        pb_warn("could not clean up after earlier interrupted runs: %s", cerr.msg);
    if (rc == 0)
        rc = expire_locked(r, o, &err);
    repo_lock_release(lock);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
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

/* Retention follows history order and parentage (chain_retain): the newest N full or
 * synthetic backups (one state counted once), everything after the oldest of them, and
 * every ancestor a kept backup needs; a backup whose descendant is kept is never
 * removed, nor the newest backup of the newest timeline. When timeline branches
 * compete (which one the cluster lives on is not known), the newest of each stays. */
static int expire_locked(repo *r, const pb_options *o, pb_error *err)
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
        chain_retain(&hist, (unsigned)o->retain_full, keep);
    if (rc == 0 && !o->dry_run)
        rc = unrecord(r, &hist, keep, err);
    /* Newest first: an incremental goes before the backups it needs, so a kill at any
     * moment leaves every listed backup with its whole chain. */
    for (size_t i = hist.count; rc == 0 && i-- > 0;) {
        if (keep[i])
            continue;
        if (!o->dry_run)
            rc = chain_drop(r, hist.items[i].id, err);
        if (rc == 0 && !o->quiet)
            printf("%s backup %s\n", o->dry_run ? "would expire" : "expired",
                   hist.items[i].id);
        PB_FAULT_POINT("expire.after-backup");
    }
    if (rc == 0)
        rc = expire_wal_before(r, &hist, keep, o, err);
    free(keep);
    chain_history_free(&hist);
    return rc;
}
