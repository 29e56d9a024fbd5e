/*
 * restore/plan.c — the restore plan, built once per command and shared by restore,
 * verify --set and rebase (as pg_combinebackup's load_manifest.c loads each manifest
 * once and hands the array down).
 *
 * Choosing a backup needs every manifest's header in history order (engine/chain_order.c):
 * a version 2 manifest gives its header with two small reads, no file record, so the
 * choice holds no manifest; only the chosen chain's manifests are then read whole (older
 * version 1 manifests are read whole for their header too). The WAL archive is listed
 * once, segments and history files together, and only when the choice or the checks
 * need it.
 */
#include "restore/plan_internal.h"

#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --set names one backup: only its manifest is read for the choice (another backup's
 * damage is verify's to report), and kept in pool for the chain. */
static int load_one(repo *r, const char *id, chain_history *hist, chain *pool,
                    pb_error *err)
{
    mf_manifest *m = NULL;
    int rc = chain_load(r, id, &m, err);
    if (rc)
        return rc;
    hist->items = malloc(sizeof(*hist->items));
    pool->items = malloc(sizeof(*pool->items));
    if (!hist->items || !pool->items) {
        mf_free(m);
        return pb_fail(err, PB_ENOMEM, "out of memory loading backup %s", id);
    }
    hist->items[hist->count++] = *mf_header(m);
    pool->items[pool->count++] = m;
    return 0;
}

/* Does the choice or a check read the archive listing? */
static bool needs_wal(const rs_opts *opts, unsigned needs)
{
    return (needs & RS_PLAN_WAL) || opts->target != RS_TARGET_IMMEDIATE ||
           opts->target_timeline;
}

/* Target, listing, history, the target placed in the WAL, choice, chain: each once. */
static int choose_and_resolve(repo *r, const rs_opts *opts, unsigned needs, rs_plan *p,
                              pb_error *err)
{
    chain_history hist = {0};
    chain pool = {0};
    int rc = rs_parse_target(opts, &p->tv, err);
    if (rc == 0)
        rc = rs_check_future(opts, &p->tv, err);
    if (rc == 0 && needs_wal(opts, needs))
        rc = rs_view_load(&p->wal, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    if (rc == 0)
        rc = rs_names_set(opts) ? load_one(r, opts->set, &hist, &pool, err)
                                : chain_history_load(r, &hist, err);
    if (rc == 0)
        rc = rs_place_target(r, opts, &p->wal, &hist, &p->tv, err);
    if (rc == 0)
        rc = rs_choose_in(r, opts, &p->tv, &p->wal, &hist, p->id, p->why, sizeof(p->why),
                          err);
    if (rc == 0)
        rc = chain_resolve_from(r, p->id, &pool, &p->chain, err);
    chain_history_free(&hist);
    chain_free(&pool);
    return rc;
}

int rs_plan_build(repo *r, const rs_opts *opts, unsigned needs, rs_plan **out,
                  pb_error *err)
{
    *out = NULL;
    rs_plan *p = calloc(1, sizeof(*p));
    if (!p)
        return pb_fail(err, PB_ENOMEM, "out of memory planning a restore from %s",
                       repo_location(r));
    int rc = choose_and_resolve(r, opts, needs, p, err);
    if (rc) {
        rs_plan_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void rs_plan_free(rs_plan *p)
{
    if (!p)
        return;
    rs_view_free(&p->wal);
    chain_free(&p->chain);
    free(p);
}

int rs_plan_check(rs_plan *p, const rs_opts *opts, pb_error *err)
{
    const mf_manifest *m = rs_plan_manifest(p);
    int rc = rs_check_manifest(m, err);
    return rc ? rc : rs_check_wal_in(&p->wal, opts, &p->tv, mf_header_c(m), &p->tl, err);
}

const mf_manifest *rs_plan_manifest(const rs_plan *p)
{
    return p->chain.items[p->chain.count - 1];
}

int rs_choose_set(repo *r, const rs_opts *opts, char out_id[MF_ID_LEN], char *why,
                  size_t why_len, pb_error *err)
{
    rs_plan *p = NULL;
    int rc = rs_plan_build(r, opts, 0, &p, err);
    if (rc == 0) {
        snprintf(out_id, MF_ID_LEN, "%s", p->id);
        snprintf(why, why_len, "%s", p->why);
    }
    rs_plan_free(p);
    return rc;
}
