/*
 * engine/storage/posix_defer.c — deferred directory syncs (repo_defer_syncs): a backup
 * commits many objects (its packs, its database list) and then the one that makes them a
 * backup, its manifest. Each of them needs its data on disk at its commit (fdatasync, in
 * posix_write.c), but the names they add need only be on disk before the manifest is
 * renamed into place (docs/DESIGN.md, data-safety rules: everything stable before the
 * manifest commits). So while the handle defers, a directory that gets a new entry (a
 * renamed object, a new directory) is listed instead of fsynced, and repo_sync_deferred
 * fsyncs each listed directory once: a full backup's pack directory once instead of once
 * per pack, its backup directory once instead of once per object written into it.
 *
 * Deletes, create-if-absent objects (archive-push, the writer lock) and everything after
 * repo_sync_deferred are synced at once as always.
 */
#include "engine/storage/posix_internal.h"

#include <stdlib.h>
#include <string.h>

/* dir is in the list (called with defer_mu held). */
static bool listed(const posix_repo *pr, const char *dir)
{
    for (size_t i = 0; i < pr->npending; i++)
        if (strcmp(pr->pending[i], dir) == 0)
            return true;
    return false;
}

int posix_sync_entry(posix_repo *pr, const char *dir, pb_error *err)
{
    pthread_mutex_lock(&pr->defer_mu);
    if (!pr->defer) {
        pthread_mutex_unlock(&pr->defer_mu);
        return posix_fsync_dir(pr, dir, err);
    }
    int rc = 0;
    char *copy = NULL;
    if (!listed(pr, dir) &&
        (PB_GROW(pr->pending, &pr->pending_cap, pr->npending + 1) || !(copy = strdup(dir))))
        rc = pb_fail(err, PB_ENOMEM, "out of memory listing directory %s/%s to sync",
                     pr->root, dir);
    else if (copy)
        pr->pending[pr->npending++] = copy;
    pthread_mutex_unlock(&pr->defer_mu);
    return rc;
}

void posix_defer_syncs(void *impl)
{
    posix_repo *pr = impl;
    pthread_mutex_lock(&pr->defer_mu);
    pr->defer = true;
    pthread_mutex_unlock(&pr->defer_mu);
}

/* Deepest first (the longest names): a directory's own entry is synced after what it
 * holds, as the immediate syncs order them. */
static int deeper_first(const void *a, const void *b)
{
    size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
    return la < lb ? 1 : la > lb ? -1 : strcmp(*(char *const *)a, *(char *const *)b);
}

int posix_sync_deferred(void *impl, pb_error *err)
{
    posix_repo *pr = impl;
    pthread_mutex_lock(&pr->defer_mu);
    pr->defer = false;
    if (pr->npending > 1)
        qsort(pr->pending, pr->npending, sizeof(*pr->pending), deeper_first);
    int rc = 0;
    for (size_t i = 0; i < pr->npending; i++) {
        if (rc == 0)
            rc = posix_fsync_dir(pr, pr->pending[i], err);
        free(pr->pending[i]);
    }
    pr->npending = 0;
    pthread_mutex_unlock(&pr->defer_mu);
    return rc;
}

void posix_defer_free(posix_repo *pr)
{
    for (size_t i = 0; i < pr->npending; i++)
        free(pr->pending[i]);
    free(pr->pending);
    pthread_mutex_destroy(&pr->defer_mu);
}
