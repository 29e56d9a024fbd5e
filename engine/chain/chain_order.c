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

/* Every manifest must be read: "newest" or retention decided without a backup that is
 * there, because its manifest is damaged, could silently pick an older state, so a
 * damaged manifest fails the load and names the object (verify reports it among the
 * rest; restore --set of another backup does not need this list). A manifest removed
 * since the listing (expire at work) is skipped. */
int chain_history_load(repo *r, chain_history *out, pb_error *err)
{
    return chain_history_load_all(r, out, NULL, err);
}

/* all NULL: each manifest is freed once its header is copied. */
int chain_history_load_all(repo *r, chain_history *out, chain *all, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    if (all)
        memset(all, 0, sizeof(*all));
    chain_ids ids;
    int rc = chain_list(r, &ids, err);
    if (rc)
        return rc;
    size_t n = ids.count ? ids.count : 1;
    out->items = calloc(n, sizeof(*out->items));
    if (!out->items || (all && !(all->items = calloc(n, sizeof(*all->items))))) {
        chain_ids_free(&ids);
        chain_history_free(out);
        return pb_fail(err, PB_ENOMEM, "out of memory listing backups in %s",
                       repo_location(r));
    }
    for (size_t i = 0; rc == 0 && i < ids.count; i++) {
        mf_manifest *m = NULL;
        /* Without `all` only headers are needed: a version 2 manifest gives its header
         * with two small reads, so history costs no memory per file. */
        int lrc = all ? chain_load(r, ids.ids[i], &m, err)
                      : chain_load_header(r, ids.ids[i], &out->items[out->count], err);
        if (lrc == PB_ENOENT)
            continue;
        if (lrc)
            rc = lrc;
        else if (all)
            out->items[out->count++] = *mf_header(m);
        else
            out->count++;
        if (lrc == 0 && all)
            all->items[all->count++] = m;
        else
            mf_free(m);
    }
    chain_ids_free(&ids);
    if (rc) {
        chain_history_free(out);
        chain_free(all);
        return rc;
    }
    rc = chain_history_place(r, 0, out, err);
    if (rc) {
        chain_history_free(out);
        chain_free(all);
    }
    return rc;
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

int chain_head(repo *r, char out[MF_ID_LEN], pb_error *err)
{
    chain_history h;
    out[0] = '\0';
    int rc = chain_history_load(r, &h, err);
    if (rc)
        return rc;
    if (h.count == 0)
        rc = pb_fail(err, PB_ENOENT, "repository %s holds no backup", repo_location(r));
    else if ((rc = chain_history_check(&h, "the chain head", err)) == 0)
        snprintf(out, MF_ID_LEN, "%s", chain_history_newest(&h)->id);
    chain_history_free(&h);
    return rc;
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
