/* tools/repo_commands.c — expire: removes what retention no longer keeps (info: tools/info_command.c). */
#include "tools/commands.h"
#include "tools/expire_plan.h"
#include "tools/annotations.h"

#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- expire ---- */

static int expire_locked(repo *r, const pb_options *o, pb_error *err);

/* Expire removes backups: it holds the repository's writer lock (storage.h) so that no
 * backup builds on a parent it is removing, and no rebase reads one. */
int cmd_expire(pb_options *o, cmd_outcome *res)
{
    const char *usage = expire_usage(o);
    if (usage)
        return cmd_usage_error(res, "%s", usage);
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

/* An incremental that goes with the backup --set names. */
static bool dependent(const pb_options *o, const mf_backup *b)
{
    return o->restore.set && strcmp(o->restore.set, b->id) != 0;
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
        rc = expire_plan(&hist, o, keep, err);
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
        if (rc == 0 && !o->quiet)
            printf("%s backup %s%s%s%s\n", o->dry_run ? "would expire" : "expired",
                   hist.items[i].id, dep ? " (built on " : "", dep ? o->restore.set : "",
                   dep ? ", which --set removes)" : "");
        PB_FAULT_POINT("expire.after-backup");
    }
    if (rc == 0)
        rc = expire_wal_plan(r, &hist, keep, o, err);
    free(keep);
    chain_history_free(&hist);
    return rc;
}
