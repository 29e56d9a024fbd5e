/*
 * engine/backup/backup_plan.c — full or incremental, decided before the server's backup state
 * is touched. The repository's history is loaded once, from the listing of backup/ the
 * cleanup made (every manifest's header, in history order: engine/chain/chain_order.c; a
 * version 2 manifest's header is two small reads, so this holds no manifest), and kept for
 * the command's metrics. The chain head's chain is handed down as headers alone (the
 * chain-length, age and verify-scan rules need no more); its records are read once, one
 * chunk at a time, to check they are whole, and that read also rebuilds a catalog left
 * behind; the parent's own go into a local copy the file-level skip streams again, so
 * memory does not grow with the database (memory bounds) and nothing is read twice. */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_plan_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The parent's manifest is read from the repository once, into a local copy in the
 * state directory that this check and the file-level skip both stream. Without a copy
 * (an older manifest, or no room in the state directory) both read the repository. */
static int open_records(repo *r, const char *id, bool parent, const char *dir,
                        chain_copy **copy, mf_stream **s, pb_error *err)
{
    pb_error cerr = PB_ERROR_INIT;
    if (parent && dir && chain_copy_fetch(r, id, dir, copy, &cerr) != 0)
        pb_debug("the parent's manifest is read twice: %s", cerr.msg);
    return *copy ? chain_copy_stream(*copy, s, err) : chain_stream_open(r, id, s, err);
}

/* Does cat (NULL: none) hold another state than the chain's head? Then the check below
 * rebuilds it on the way, from the same streams. */
static bool needs_rebuild(mf_catalog *cat, const chain *c)
{
    const char *id = mf_header_c(c->items[c->count - 1])->id;
    char head[MF_ID_LEN] = "";
    pb_error err = PB_ERROR_INIT;
    int rc = cat ? mf_catalog_head(cat, head, &err) : 0;
    if (!cat || (rc == 0 && strcmp(head, id) == 0))
        return false;
    pb_info("catalog head is %s, repository chain head is %s: rebuilding the catalog from "
            "the repository", rc == 0 ? head : "(empty)", id);
    return true;
}

/* Every record of the chain's manifests is readable (each chunk's checksum, the count
 * its index promises), read one chunk at a time: a chain the catalog rebuild or the
 * file-level skip would fail on mid-backup plans a full backup instead. A catalog that
 * is not at the chain's head is rebuilt from these same streams (chain_sync_catalog's
 * work, each manifest read once); one left half-built by a failure is emptied. */
static int check_records(repo *r, const chain *c, const char *dir, mf_catalog *cat,
                         chain_copy **copy, pb_error *err)
{
    bool rebuild = needs_rebuild(cat, c);
    int rc = rebuild ? mf_catalog_reset(cat, err) : 0;
    for (size_t i = 0; rc == 0 && i < c->count; i++) {
        mf_stream *s = NULL;
        mf_file f = {0};
        rc = open_records(r, mf_header_c(c->items[i])->id, i + 1 == c->count, dir, copy, &s,
                          err);
        if (rc == 0 && rebuild)
            rc = mf_catalog_apply_stream(cat, s, err);
        while (rc == 0 && !rebuild && (rc = mf_stream_next(s, &f, err)) == 1) {
            mf_file_clear(&f);
            rc = 0;
        }
        mf_file_clear(&f);
        mf_stream_close(s);
    }
    pb_error rerr = PB_ERROR_INIT;
    if (rc && rebuild && mf_catalog_reset(cat, &rerr) != 0)
        pb_warn("%s", rerr.msg);
    return rc;
}

/* With the head usable: incremental unless a rule asks for a full backup. */
static void choose(repo *r, const bk_opts *opts, mf_catalog *cat, uint64_t system_id,
                   const char *head, const chain_history *hist, const mf_backup *ph,
                   bk_plan *plan)
{
    pb_error lerr = PB_ERROR_INIT;
    if (ph->system_id != system_id) {
        snprintf(plan->reason, sizeof(plan->reason),
                 "latest backup %s is of another cluster (system identifier %" PRIu64 ")",
                 head, ph->system_id);
        return;
    }
    if (chain_resolve_headers(r, hist, head, &plan->chain, &lerr) != 0) {
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
    } else if (check_records(r, &plan->chain, opts->state_dir, cat, &plan->parent_copy,
                             &lerr) != 0) { /* read only for a chain built on */
        snprintf(plan->reason, sizeof(plan->reason), "chain of %s is broken (%s)", head,
                 lerr.msg);
    } else {
        plan->type = 'I';
        plan->parent = plan->chain.items[plan->chain.count - 1];
        snprintf(plan->reason, sizeof(plan->reason), "incremental on top of %s", head);
    }
}

/* The chain head: the newest backup along the history of the cluster's timeline tli
 * (0: the newest in the archive), by state, not id (a rebase's synthetic full of an older
 * state has the last id), from the headers alone. When the history cannot be loaded (a
 * damaged manifest header somewhere), the last id stands in, as its own header decides.
 * false (a full, with the reason) when no backup is on that history, or branches
 * compete. */
static bool pick_head(repo *r, const chain_ids *ids, uint32_t tli, bk_plan *plan,
                      chain_history *hist, char head[MF_ID_LEN])
{
    pb_error lerr = PB_ERROR_INIT;
    snprintf(head, MF_ID_LEN, "%s", plan->latest);
    if (chain_history_load_listed(r, ids, tli, hist, &lerr) != 0) {
        chain_history_free(hist);
        return true;
    }
    if (chain_history_check(hist, "the parent of an incremental", &lerr)) {
        snprintf(plan->reason, sizeof(plan->reason), "%s", lerr.msg);
        return false;
    }
    if (!chain_history_newest(hist)) { /* every backup on another branch */
        snprintf(plan->reason, sizeof(plan->reason), "no backup lies on the history of "
                 "timeline %u", hist->timeline);
        return false;
    }
    snprintf(head, MF_ID_LEN, "%s", chain_history_newest(hist)->id);
    return true;
}

int bk_plan_type(repo *r, const chain_ids *listed, mf_catalog *cat, const bk_opts *opts,
                 uint64_t system_id, uint32_t tli, bk_plan *plan, pb_error *err)
{
    chain_ids own = {0};
    chain_history *hist = &plan->history;
    memset(plan, 0, sizeof(*plan));
    int rc = listed ? 0 : chain_list(r, &own, err);
    if (rc)
        return rc;
    const chain_ids ids = listed ? *listed : own;
    plan->type = 'F';
    if (ids.count == 0) {
        plan->history_known = true; /* empty */
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
    pb_error lerr = PB_ERROR_INIT;
    bool picked = pick_head(r, &ids, tli, plan, hist, head);
    plan->history_known = hist->items != NULL;
    if (!picked)
        goto out;
    mf_backup ph;
    const mf_backup *found = chain_history_find(hist, head);
    if (found) {
        ph = *found;
    } else if (chain_load_header(r, head, &ph, &lerr) != 0) {
        snprintf(plan->reason, sizeof(plan->reason), "latest backup %s is unusable (%s)",
                 head, lerr.msg);
        goto out;
    }
    choose(r, opts, cat, system_id, head, hist->count ? hist : NULL, &ph, plan);
out:
    if (plan->type == 'F') {
        chain_free(&plan->chain);
        chain_copy_free(plan->parent_copy);
        plan->parent_copy = NULL;
    }
    chain_ids_free(&own);
    return 0;
}

void bk_plan_free(bk_plan *plan)
{
    if (!plan)
        return;
    chain_free(&plan->chain);
    chain_copy_free(plan->parent_copy);
    plan->parent_copy = NULL;
    plan->parent = NULL;
    chain_history_free(&plan->history);
    plan->history_known = false;
}
