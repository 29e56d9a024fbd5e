/*
 * engine/chain/chain_history.c — the repository's backups as a history: every manifest's
 * header listed (chain_order.c sorts them), then placed along the timeline the cluster
 * is on (chain_timeline.c). Above both, so neither needs the other to load.
 */
#include "engine/chain/chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every manifest must be read: "newest" or retention decided without a backup that is
 * there, because its manifest is damaged, could silently pick an older state, so a
 * damaged manifest fails the load and names the object (verify reports it among the
 * rest; restore --set of another backup does not need this list). A manifest removed
 * since the listing (expire at work) is skipped. */
int chain_history_load(repo *r, chain_history *out, pb_error *err)
{
    return chain_history_load_all(r, out, NULL, err);
}

/* The history of the listed ids; all NULL: each manifest is freed once its header is
 * copied. */
static int load_ids(repo *r, const chain_ids *listed, chain_history *out, chain *all,
                    pb_error *err)
{
    const chain_ids ids = *listed;
    int rc = 0;
    size_t n = ids.count ? ids.count : 1;
    out->items = calloc(n, sizeof(*out->items));
    if (!out->items || (all && !(all->items = calloc(n, sizeof(*all->items))))) {
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

int chain_history_load_all(repo *r, chain_history *out, chain *all, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    if (all)
        memset(all, 0, sizeof(*all));
    chain_ids ids;
    int rc = chain_list(r, &ids, err);
    if (rc == 0)
        rc = load_ids(r, &ids, out, all, err);
    chain_ids_free(&ids);
    return rc;
}

int chain_history_load_listed(repo *r, const chain_ids *ids, uint32_t tli,
                              chain_history *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    int rc = load_ids(r, ids, out, NULL, err);
    if (rc == 0 && tli && (rc = chain_history_place(r, tli, out, err)) != 0)
        chain_history_free(out);
    return rc;
}

int chain_history_load_on(repo *r, uint32_t tli, chain_history *out, pb_error *err)
{
    int rc = chain_history_load_all(r, out, NULL, err);
    if (rc == 0 && tli && (rc = chain_history_place(r, tli, out, err)) != 0)
        chain_history_free(out);
    return rc;
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
