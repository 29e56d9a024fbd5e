/*
 * engine/chain/chain_order.c — backups in history order, and what expire must keep.
 *
 * Ids sort by the time a backup was *made*, which is not the state it holds: rebase
 * makes a synthetic full of an older backup whose id sorts after every backup. So every
 * decision that means "newer" (the latest backup, the newest before a target, the parent
 * of the next incremental, retention) orders backups by the point their content reaches:
 * stop LSN, then stop time. At an equal stop point a synthetic full sorts after the real
 * backup it was built from: both restore the same state, and the synthetic one is the
 * shorter chain, so the next incremental builds on it and the older chain can expire
 * (which is what rebase is for). The id breaks any remaining tie, so the order is total.
 * (docs/DESIGN.md, rule 9.)
 */
#include "engine/chain/chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chain_cmp_history(const mf_backup *a, const mf_backup *b)
{
    if (a->stop_lsn != b->stop_lsn)
        return a->stop_lsn < b->stop_lsn ? -1 : 1;
    bool sa = a->type == 'S', sb = b->type == 'S';
    if (sa != sb)
        return sa ? 1 : -1;
    if (a->stop_time != b->stop_time)
        return a->stop_time < b->stop_time ? -1 : 1;
    return strcmp(a->id, b->id);
}

static int cmp_entry(const void *a, const void *b)
{
    return chain_cmp_history(a, b);
}

void chain_history_sort(chain_history *h)
{
    if (h->count > 1)
        qsort(h->items, h->count, sizeof(*h->items), cmp_entry);
}

void chain_history_free(chain_history *h)
{
    if (!h)
        return;
    free(h->items);
    h->items = NULL;
    h->count = h->off_path = 0;
    h->compete = false;
}

const mf_backup *chain_history_find(const chain_history *h, const char *id)
{
    for (size_t i = 0; i < h->count; i++)
        if (strcmp(h->items[i].id, id) == 0)
            return &h->items[i];
    return NULL;
}

/* Mark i and every ancestor of i (a parent missing from the history ends the walk:
 * such a chain cannot be restored, and verify reports it). */
static void keep_with_parents(const chain_history *h, size_t i, bool *keep)
{
    for (size_t steps = 0; steps <= h->count; steps++) {
        keep[i] = true;
        const char *parent = h->items[i].parent;
        if (!parent[0])
            return;
        const mf_backup *p = chain_history_find(h, parent);
        if (!p)
            return;
        i = (size_t)(p - h->items);
    }
}

/* Two fulls of one state (a rebase run twice, or a full and its synthetic copy) are one
 * restore point: counting both would let the second push the previous week out. */
static bool same_state(const mf_backup *a, const mf_backup *b)
{
    return a && a->stop_lsn == b->stop_lsn && a->timeline == b->timeline;
}

size_t chain_retain(const chain_history *h, unsigned retain_full, bool *keep)
{
    size_t from = 0, fulls = 0, kept = 0;
    const mf_backup *counted = NULL;
    for (size_t i = h->count; retain_full && i-- > 0;) {
        char t = h->items[i].type;
        if (t != 'F' && t != 'S')
            continue;
        if (same_state(counted, &h->items[i])) {
            from = i; /* the copy of the state just counted goes with it */
            continue;
        }
        if (fulls == retain_full)
            break;
        fulls++;
        counted = &h->items[i];
        from = i;
    }
    if (fulls < retain_full)
        from = 0;
    for (size_t i = 0; i < h->count; i++)
        keep[i] = false;
    for (size_t i = from; i < h->count; i++)
        keep_with_parents(h, i, keep);
    if (h->count > h->off_path) /* the newest of the path, whatever the count says */
        keep_with_parents(h, h->count - 1, keep);
    if (h->compete) /* and the newest of the branch that competes with it */
        keep_with_parents(h, h->off_path - 1, keep);
    for (size_t i = 0; i < h->count; i++)
        kept += keep[i];
    return kept;
}
