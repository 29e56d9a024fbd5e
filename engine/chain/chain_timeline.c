/*
 * engine/chain/chain_timeline.c — history order along a timeline.
 *
 * Stop LSNs compare only along one history: a copy restored from an older backup and
 * promoted starts a new timeline at its switch point, and the backups the old primary
 * took past that point (with higher LSNs) belong to a branch the new timeline left. The
 * cluster is on the newest timeline in the archive (PostgreSQL's "latest"), so the
 * newest backup is the newest on that timeline's history (its history file, archived at
 * the promotion, names each ancestor and where it was left), and retention keeps it.
 * Backups on abandoned branches sort before the path, each branch by LSN. When the
 * newest timeline holds no backup of its own while a branch it left has one past the
 * switch, the two compete (a promoted test restore still archiving, or a live cluster
 * not yet backed up): commands that must pick one refuse and name both.
 */
#include "engine/chain/chain.h"
#include "engine/wal/wal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The newest timeline whose history file is archived, from the newest a backup is on,
 * probed one by one as PostgreSQL's findNewestTimeLine does (one small request when
 * there is none: no listing of the archive). */
static int newest_timeline(repo *r, uint32_t *newest, pb_error *err)
{
    for (;;) {
        char name[17];
        bool present = false;
        arch_history_name(name, *newest + 1);
        int rc = arch_exists(r, name, &present, err);
        if (rc || !present)
            return rc;
        ++*newest;
    }
}

/* The timeline path of tli: its history file when it has one, else tli alone. */
static int load_path(repo *r, uint32_t tli, arch_tl_entry **tl, size_t *n, pb_error *err)
{
    char name[17];
    arch_history_name(name, tli);
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = tli > 1 ? arch_read(r, name, &text, &len, err) : PB_ENOENT;
    if (rc == 0)
        rc = arch_history_parse((const char *)text, len, tli, tl, n, err);
    free(text);
    if (rc != PB_ENOENT)
        return rc;
    *tl = malloc(sizeof(**tl));
    if (!*tl)
        return pb_fail(err, PB_ENOMEM, "out of memory reading timeline history");
    (*tl)[0] = (arch_tl_entry){tli, 0, UINT64_MAX};
    *n = 1;
    return 0;
}

/* On the path: its timeline is one of the path's and it stopped at or before the point
 * the path left that timeline (consistent there, recovery can follow the switch). */
static bool on_path(const arch_tl_entry *tl, size_t n, const mf_backup *b)
{
    for (size_t i = 0; i < n; i++)
        if (tl[i].tli == b->timeline)
            return b->stop_lsn <= tl[i].end;
    return false;
}

/* Stable partition of the (history-sorted) items: off the path first. */
static int partition(chain_history *h, const bool *on)
{
    mf_backup *sorted = malloc(h->count * sizeof(*sorted));
    if (!sorted)
        return PB_ENOMEM;
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < h->count; i++)
            if (on[i] == (pass == 1))
                sorted[k++] = h->items[i];
    free(h->items);
    h->items = sorted;
    return 0;
}

int chain_history_place(repo *r, uint32_t tli, chain_history *h, pb_error *err)
{
    uint32_t newest = 1;
    int rc = 0;
    chain_history_sort(h); /* one order along every timeline, then split off branches */
    h->off_path = 0;
    h->compete = false;
    for (size_t i = 0; i < h->count; i++)
        newest = h->items[i].timeline > newest ? h->items[i].timeline : newest;
    if (tli == 0 && h->count)
        rc = newest_timeline(r, &newest, err);
    h->timeline = tli ? tli : newest;
    bool mixed = false; /* a backup on another timeline: only then is there a path to read */
    for (size_t i = 0; i < h->count; i++)
        mixed |= h->items[i].timeline != h->timeline;
    if (rc || !mixed || h->count == 0)
        return rc;
    arch_tl_entry *tl = NULL;
    size_t n = 0;
    bool *on = calloc(h->count, sizeof(*on)), own = false;
    rc = on ? load_path(r, h->timeline, &tl, &n, err)
            : pb_fail(err, PB_ENOMEM, "out of memory ordering backups by timeline");
    for (size_t i = 0; rc == 0 && i < h->count; i++) {
        on[i] = on_path(tl, n, &h->items[i]);
        h->off_path += !on[i];
        own |= h->items[i].timeline == h->timeline;
    }
    if (rc == 0 && h->off_path && partition(h, on))
        rc = pb_fail(err, PB_ENOMEM, "out of memory ordering backups by timeline");
    if (rc == 0)
        h->compete = tli == 0 && h->off_path > 0 && !own;
    free(on);
    free(tl);
    return rc;
}

const mf_backup *chain_history_newest(const chain_history *h)
{
    return h->count > h->off_path ? &h->items[h->count - 1] : NULL;
}

int chain_history_check(const chain_history *h, const char *what, pb_error *err)
{
    if (!h->compete)
        return 0;
    const mf_backup *branch = &h->items[h->off_path - 1], *path = chain_history_newest(h);
    char a[32], b[32] = "";
    pb_lsn_format(branch->stop_lsn, a);
    if (path)
        pb_lsn_format(path->stop_lsn, b);
    char on[200] = "no backup";
    if (path)
        snprintf(on, sizeof(on), "backup %s (timeline %u, stop LSN %s)", path->id,
                 path->timeline, b);
    return pb_fail(err, PB_ESTATE,
                   "two timeline branches compete for %s: timeline %u (the "
                   "newest in the archive) holds no backup of its own, its history holds %s, "
                   "while backup %s (timeline %u, stop LSN %s) is on a branch it left; "
                   "choose with --set ID (restore, rebase) or --target-timeline N (restore), "
                   "or take a backup of the cluster on timeline %u first", what,
                   h->timeline, on, branch->id, branch->timeline, a, h->timeline);
}
