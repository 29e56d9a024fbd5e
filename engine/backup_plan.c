/*
 * engine/backup_plan.c — full or incremental, decided before the server's backup state
 * is touched. The repository's history is loaded once (every manifest's header, in
 * history order: engine/chain_order.c; a version 2 manifest's header is two small reads,
 * so this holds no manifest); only the chain head's chain is then read whole and handed
 * down in the plan, so the catalog check (chain_sync_catalog) and the chain-length and
 * age rules read nothing again.
 */
#include "engine/backup_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The manifest of id in pool, or NULL. */
static const mf_manifest *in_pool(const chain *pool, const char *id)
{
    for (size_t i = 0; i < pool->count; i++)
        if (pool->items[i] && strcmp(mf_header_c(pool->items[i])->id, id) == 0)
            return pool->items[i];
    return NULL;
}

/* The chain head by stop LSN (a rebase's synthetic full of an older state has the last
 * id), from the headers alone. When the history cannot be loaded (a damaged manifest
 * header somewhere), the last id stands in, as its own manifest decides below. */
static void find_head(repo *r, const bk_plan *plan, char head[MF_ID_LEN])
{
    chain_history hist = {0};
    pb_error herr = PB_ERROR_INIT;
    snprintf(head, MF_ID_LEN, "%s", plan->latest);
    if (chain_history_load(r, &hist, &herr) == 0 && hist.count)
        snprintf(head, MF_ID_LEN, "%s", hist.items[hist.count - 1].id);
    chain_history_free(&hist);
}

/* The head's manifest from pool, or read when the history load could not give it. */
static int head_manifest(repo *r, chain *pool, const char *head, const mf_manifest **out,
                         pb_error *err)
{
    if ((*out = in_pool(pool, head)))
        return 0;
    mf_manifest *m = NULL;
    int rc = chain_load(r, head, &m, err);
    if (rc)
        return rc;
    mf_manifest **items = realloc(pool->items, (pool->count + 1) * sizeof(*items));
    if (!items) {
        mf_free(m);
        return pb_fail(err, PB_ENOMEM, "out of memory planning a backup");
    }
    pool->items = items;
    pool->items[pool->count++] = m;
    *out = m;
    return 0;
}

/* With the head usable: incremental unless a rule asks for a full backup. */
static void choose(repo *r, const bk_opts *opts, uint64_t system_id, const char *head,
                   chain *pool, const mf_backup *ph, bk_plan *plan)
{
    pb_error lerr = PB_ERROR_INIT;
    if (ph->system_id != system_id) {
        snprintf(plan->reason, sizeof(plan->reason),
                 "latest backup %s is of another cluster (system identifier %" PRIu64 ")",
                 head, ph->system_id);
        return;
    }
    if (chain_resolve_from(r, head, pool, &plan->chain, &lerr) != 0) {
        snprintf(plan->reason, sizeof(plan->reason), "chain of %s is broken (%s)", head,
                 lerr.msg);
        return;
    }
    unsigned count = (unsigned)plan->chain.count;
    int64_t full_time = mf_header_c(plan->chain.items[0])->start_time;
    if (opts->full_every && count >= opts->full_every) {
        snprintf(plan->reason, sizeof(plan->reason),
                 "chain already holds %u backups (--full-every %u)", count, opts->full_every);
    } else if (opts->full_after_secs && time(NULL) - full_time >= opts->full_after_secs) {
        snprintf(plan->reason, sizeof(plan->reason),
                 "the chain's full backup is older than --full-after (%" PRId64 " s)",
                 (int64_t)opts->full_after_secs);
    } else {
        plan->type = 'I';
        plan->parent = plan->chain.items[plan->chain.count - 1];
        snprintf(plan->reason, sizeof(plan->reason), "incremental on top of %s", head);
    }
}

int bk_plan_type(repo *r, const bk_opts *opts, uint64_t system_id, bk_plan *plan,
                 pb_error *err)
{
    chain_ids ids;
    chain pool = {0};
    memset(plan, 0, sizeof(*plan));
    int rc = chain_list(r, &ids, err);
    if (rc)
        return rc;
    plan->type = 'F';
    if (ids.count == 0) {
        snprintf(plan->reason, sizeof(plan->reason), "no backup in the repository yet");
        goto out;
    }
    /* plan->latest (the last id) keeps new ids unique. */
    snprintf(plan->latest, sizeof(plan->latest), "%s", ids.ids[ids.count - 1]);
    if (opts->type == 'F') {
        snprintf(plan->reason, sizeof(plan->reason), "full backup requested");
        goto out;
    }
    char head[MF_ID_LEN];
    find_head(r, plan, head);
    const mf_manifest *hm = NULL;
    pb_error lerr = PB_ERROR_INIT;
    if (head_manifest(r, &pool, head, &hm, &lerr) != 0) {
        snprintf(plan->reason, sizeof(plan->reason), "latest backup %s is unusable (%s)",
                 head, lerr.msg);
        goto out;
    }
    choose(r, opts, system_id, head, &pool, mf_header_c(hm), plan);
out:
    if (plan->type == 'F')
        chain_free(&plan->chain);
    chain_free(&pool);
    chain_ids_free(&ids);
    return 0;
}

void bk_plan_free(bk_plan *plan)
{
    if (!plan)
        return;
    chain_free(&plan->chain);
    plan->parent = NULL;
}
