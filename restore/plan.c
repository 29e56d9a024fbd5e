/*
 * restore/plan.c — the restore plan, built once per command and shared by restore,
 * verify --set and rebase (as pg_combinebackup's load_manifest.c loads each manifest
 * once and hands the array down).
 *
 * Choosing a backup needs every manifest's header in history order (engine/chain/chain_order.c):
 * a version 2 manifest gives its header with two small reads, no file record, so the
 * choice holds no manifest, and the chosen chain is resolved from those headers too; the
 * files are read later, as merged streams (plan_merge.c), and the chosen manifest's
 * outline in one more pass (rs_plan_outline). Older version 1 manifests are read whole
 * wherever they are read. The WAL archive is listed once, segments and history files
 * together, and only when the choice or the checks need it.
 */
#include "restore/plan.h"

#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --set names one backup: only its header is read for the choice (another backup's
 * damage is verify's to report). */
static int load_one(repo *r, const char *id, chain_history *hist, pb_error *err)
{
    if (!(hist->items = malloc(sizeof(*hist->items))))
        return pb_fail(err, PB_ENOMEM, "out of memory loading backup %s", id);
    int rc = chain_load_header(r, id, &hist->items[0], err);
    hist->count = rc == 0;
    return rc;
}

/* Every backup of the chain is of the cluster the repository identity file names (as
 * chain_resolve checks), so a foreign manifest stops the command before any read. */
static int check_identity(repo *r, const rs_plan *p, pb_error *err)
{
    uint64_t sys = p->hdrs[p->nchain - 1].system_id;
    for (size_t i = 0; i + 1 < p->nchain; i++)
        if (p->hdrs[i].system_id != sys)
            return pb_fail(err, PB_ECORRUPT, "backup %s is of the cluster with system "
                           "identifier %llu, its chain's newest (%s) of %llu", p->hdrs[i].id,
                           (unsigned long long)p->hdrs[i].system_id, p->id,
                           (unsigned long long)sys);
    return chain_verify_identity(r, sys, p->id, err);
}

/* The chain of p->id from headers: the history's when it has them, else read (two small
 * reads of a version 2 manifest); parents walked back to the full, then oldest first. */
static int resolve_headers(repo *r, const chain_history *hist, rs_plan *p, pb_error *err)
{
    char next[MF_ID_LEN];
    size_t cap = 0;
    int rc = 0;
    snprintf(next, sizeof(next), "%s", p->id);
    while (rc == 0 && next[0]) {
        if (p->nchain >= 100000)
            return pb_fail(err, PB_ECORRUPT, "backup chain of %s loops", p->id);
        if (PB_GROW(p->hdrs, &cap, p->nchain + 1))
            return pb_fail(err, PB_ENOMEM, "out of memory resolving the chain of %s", p->id);
        const mf_backup *h = chain_history_find(hist, next);
        if (h)
            p->hdrs[p->nchain] = *h;
        else if ((rc = chain_load_header(r, next, &p->hdrs[p->nchain], err)) && p->nchain)
            pb_error_wrap(err, "backup %s needs its parent %s", p->id, next);
        if (rc == 0)
            snprintf(next, sizeof(next), "%s", p->hdrs[p->nchain++].parent);
    }
    for (size_t i = 0; rc == 0 && i < p->nchain / 2; i++) {
        mf_backup t = p->hdrs[i];
        p->hdrs[i] = p->hdrs[p->nchain - 1 - i];
        p->hdrs[p->nchain - 1 - i] = t;
    }
    return rc ? rc : check_identity(r, p, err);
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
    int rc = rs_parse_target(opts, &p->tv, err);
    if (rc == 0)
        rc = rs_check_future(opts, &p->tv, err);
    if (rc == 0 && needs_wal(opts, needs))
        rc = rs_view_load(&p->wal, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    if (rc == 0)
        rc = rs_names_set(opts) ? load_one(r, opts->set, &hist, err)
                                : chain_history_load(r, &hist, err);
    if (rc == 0 && !rs_names_set(opts))
        rc = rs_order_history(r, opts, &hist, err);
    if (rc == 0)
        rc = rs_place_target(r, opts, &p->wal, &hist, &p->tv, err);
    if (rc == 0)
        rc = rs_choose_in(r, opts, &p->tv, &p->wal, &hist, p->id, &p->tl, p->why,
                          sizeof(p->why), err);
    if (rc == 0)
        rc = resolve_headers(r, &hist, p, err);
    chain_history_free(&hist);
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
    free(p->hdrs);
    free(p);
}

int rs_plan_check(rs_plan *p, const rs_opts *opts, pb_error *err)
{
    /* the timeline the choice followed for the chosen backup is kept, not followed again */
    if (p->tl.setting[0])
        return rs_check_wal_on_path(&p->wal, opts, &p->tv, rs_plan_header(p), err);
    return rs_check_wal_in(&p->wal, opts, &p->tv, rs_plan_header(p), &p->tl, err);
}

const mf_backup *rs_plan_header(const rs_plan *p)
{
    return &p->hdrs[p->nchain - 1];
}

static uint64_t outline_bytes(const mf_file *f)
{
    return sizeof(*f) + strlen(f->path) + 1 + (f->link_target ? strlen(f->link_target) + 1 : 0);
}

/* f (the stream's record) into the outline: its runs and page hashes dropped. */
static int keep_entry(rs_outline *o, mf_file *f, pb_error *err)
{
    free(f->runs);
    free(f->page_hashes);
    f->runs = NULL;
    f->page_hashes = NULL;
    f->nruns = 0;
    uint64_t bytes = outline_bytes(f);
    int rc = mf_add_file(o->m, f, err); /* takes f's pointers */
    o->peak += rc ? 0 : bytes + sizeof(mf_file); /* the array slot as well */
    return rc;
}

int rs_plan_outline(repo *r, const rs_plan *p, bool files, rs_outline *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    const mf_backup *h = rs_plan_header(p);
    mf_stream *s = NULL;
    int rc = mf_new(&out->m, h, err);
    if (rc == 0)
        rc = chain_stream_open(r, h->id, &s, err);
    mf_file f;
    while (rc == 0 && (rc = mf_stream_next(s, &f, err)) == 1) {
        rc = rs_check_entry(&f, err); /* what a restore refuses before writing */
        bool regular = f.kind == MF_REL || f.kind == MF_FILE;
        out->totals.files_total += regular;
        out->totals.bytes_total += regular ? f.size : 0;
        if (rc == 0 && (files || !regular || strcmp(f.path, "tablespace_map") == 0))
            rc = keep_entry(out, &f, err);
        mf_file_clear(&f);
    }
    if (rc)
        pb_error_wrap(err, "backup %s", h->id);
    if (s)
        out->peak += mf_stream_peak(s);
    mf_stream_close(s);
    if (rc)
        rs_outline_free(out);
    return rc;
}

void rs_outline_free(rs_outline *o)
{
    if (!o)
        return;
    mf_free(o->m);
    o->m = NULL;
}

int rs_set_open(repo *r, const rs_opts *opts, unsigned how, const char *doing, rs_plan **p,
                rs_outline *ol, pb_error *err)
{
    int rc = rs_plan_build(r, opts, how & RS_OPEN_WAL ? RS_PLAN_WAL : 0, p, err);
    if (rc)
        return rc;
    rs_plan *pl = *p;
    if (doing)
        pb_info("%s backup %s: %s", doing, pl->id, pl->why);
    if (how & RS_OPEN_WAL) {
        rc = rs_plan_check(pl, opts, err);
        if (rc == 0) /* the WAL replay needs read whole, and the tablespaces it creates */
            rc = rs_check_replay(&pl->wal, &pl->tv, rs_plan_header(pl), opts,
                                 (how & RS_OPEN_TABLESPACES) != 0, err);
    }
    if (rc == 0 && (how & RS_OPEN_OUTLINE))
        rc = rs_plan_outline(r, pl, (how & RS_OPEN_ENTRIES) != 0, ol, err);
    return rc;
}

void rs_ctx_init(rs_ctx *ctx, repo *r, const rs_plan *p, rs_stats *stats)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->repo = r;
    ctx->hdrs = p->hdrs;
    ctx->nchain = p->nchain;
    ctx->stats = stats;
}
