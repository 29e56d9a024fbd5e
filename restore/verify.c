/*
 * restore/verify.c — verify backups without writing anything.
 *
 * rs_verify checks one backup as its restore would read it: the whole chain rebuilt
 * through the restore path (every needed frame read once, every page hash checked) and
 * the WAL from its start to its stop. rs_verify_repo with no set checks the repository
 * as a whole, as pgBackRest's verify does: each manifest is loaded once; each backup's
 * own frames (the runs its manifest lists, which live in its own packs) are read once
 * (verify_frames.c), so a frame that many backups of a chain rely on is read once per
 * run; and each chain
 * is checked to be complete (every page of every file has a source, every whole file
 * its stored copy). A restore reads only frames of its chain, so together these cover
 * what any restore of any listed backup would read. The WAL archive is verify_wal.c.
 */
#include "restore/verify_internal.h"
#include "restore/plan_internal.h"

#include "engine/wal/wal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int verify_set(repo *r, const char *set, unsigned jobs, const rs_progress_hook *hook,
                      rs_stats *stats, pb_error *err)
{
    rs_plan *p = NULL;
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    rs_opts o = RS_OPTS_INIT;
    o.set = set;
    double t0 = pb_now();
    int rc = rs_plan_build(r, &o, RS_PLAN_WAL, &p, err);
    if (rc)
        return rc;
    const mf_manifest *m = rs_plan_manifest(p);
    ctx.repo = r;
    ctx.chain = &p->chain;
    ctx.stats = stats;
    ctx.progress = hook ? hook->fn : NULL; /* file by file, as a restore */
    ctx.progress_ctx = hook ? hook->ctx : NULL;
    rc = rs_plan_check(p, &o, err); /* the manifest, and WAL start..stop: one listing */
    if (rc == 0)
        rc = rs_rebuild_parallel(&ctx, m, jobs, err);
    if (rc)
        pb_error_wrap(err, "verifying backup %s", p->id);
    snprintf(stats->id, sizeof(stats->id), "%s", p->id);
    stats->chain_length = p->chain.count;
    stats->seconds = pb_now() - t0;
    rs_ctx_free_buffers(&ctx);
    rs_plan_free(p);
    return rc;
}

int rs_verify(repo *r, const char *set, unsigned jobs, rs_stats *stats, pb_error *err)
{
    return verify_set(r, set, jobs, NULL, stats, err);
}

void vfy_progress(vfy_run *v, uint64_t bytes)
{
    if (!v->progress || !v->progress->fn)
        return;
    v->prog.bytes_done += bytes;
    v->progress->fn(v->progress->ctx, &v->prog);
}

void vfy_problem(vfy_run *v, const char *id, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    v->stats->problems++;
    if (++v->subject_problems <= VFY_NOTES_PER_SUBJECT)
        v->note(v->note_ctx, id, true, msg);
}

/* ---- each chain complete ------------------------------------------------------------ */

typedef struct loaded {
    mf_manifest **ms;
    size_t n;
} loaded;

static const mf_manifest *find_loaded(const loaded *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(mf_header_c(l->ms[i])->id, id) == 0)
            return l->ms[i];
    return NULL;
}

/* The chain of m, newest first, from the loaded manifests; a missing parent is noted. */
static size_t chain_of(vfy_run *v, const loaded *l, const mf_manifest *m,
                       const mf_manifest **out, size_t cap)
{
    size_t n = 0;
    const mf_manifest *b = m;
    while (b && n < cap) {
        out[n++] = b;
        const char *parent = mf_header_c(b)->parent;
        if (!parent[0])
            return n;
        b = find_loaded(l, parent);
        if (!b)
            vfy_problem(v, mf_header_c(m)->id, "its chain needs backup %s (parent of %s), "
                        "which is missing or unreadable (backup/%s/manifest)", parent,
                        mf_header_c(out[n - 1])->id, parent);
    }
    if (b && n == cap)
        vfy_problem(v, mf_header_c(m)->id, "its chain is longer than %zu backups (a loop?)",
                    cap);
    return b ? n : 0;
}

/* As the restore plans a file (rebuild.c map_sources): newest backup first, until a
 * backup does not hold the file as a relation. Pages an older backup of the chain holds
 * in a failed frame make this backup unrestorable too: named once per file. */
static int rel_covered(vfy_run *v, const mf_manifest *const *c, size_t n, const mf_file *f)
{
    uint8_t *seen = calloc(f->npages ? f->npages : 1, 1);
    if (!seen)
        return PB_ENOMEM;
    uint32_t missing = f->npages, first = 0;
    const mf_manifest *bad_in = NULL;
    for (size_t i = 0; i < n && missing; i++) {
        const mf_file *fi = mf_find(c[i], f->path);
        if (!fi || fi->kind != MF_REL)
            break;
        for (uint32_t r = 0; r < fi->nruns; r++) {
            bool bad = i > 0 && v->nbad && vfy_is_bad(v, c[i], &fi->runs[r]);
            for (uint32_t k = 0; k < fi->runs[r].count; k++) {
                uint32_t p = fi->runs[r].first + k;
                if (p < f->npages && !seen[p]) {
                    seen[p] = 1;
                    missing--;
                    bad_in = bad && !bad_in ? c[i] : bad_in;
                }
            }
        }
    }
    while (missing && first < f->npages && seen[first])
        first++;
    if (missing)
        vfy_problem(v, mf_header_c(c[0])->id, "%s block %u has no source in its chain (%u "
                    "blocks missing)", f->path, first, missing);
    if (bad_in)
        vfy_problem(v, mf_header_c(c[0])->id, "%s: its restore needs a damaged frame of "
                    "backup %s", f->path, mf_header_c(bad_in)->id);
    free(seen);
    return 0;
}

static int check_chain(vfy_run *v, const loaded *l, const mf_manifest *m)
{
    const mf_manifest *c[4096];
    size_t n = chain_of(v, l, m, c, sizeof(c) / sizeof(c[0]));
    int rc = 0;
    pb_error e = PB_ERROR_INIT;
    if (rs_check_manifest(m, &e) != 0) /* what a restore refuses before writing */
        vfy_problem(v, mf_header_c(m)->id, "backup/%s/manifest: %s", mf_header_c(m)->id,
                    e.msg);
    if (rs_db_list_check(v->r, mf_header_c(m)->id, &e) != 0) /* restore --db-include's */
        vfy_problem(v, mf_header_c(m)->id, "%s", e.msg);
    for (size_t i = 0; n && rc == 0 && i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        if (f->kind == MF_REL) {
            rc = rel_covered(v, c, n, f);
        } else if (f->kind == MF_FILE) {
            const mf_file *fs = NULL;
            for (size_t k = 0; k < n && !fs; k++)
                if (strcmp(mf_header_c(c[k])->id, f->stored_in) == 0)
                    fs = mf_find(c[k], f->path);
            bool bad = false;
            for (uint32_t k = 0; fs && fs != f && v->nbad && k < fs->nruns && !bad; k++)
                bad = vfy_is_bad(v, find_loaded(l, f->stored_in), &fs->runs[k]);
            if (!fs || fs->kind != MF_FILE || fs->hash != f->hash)
                vfy_problem(v, mf_header_c(m)->id, "%s: its content, recorded in backup %s, "
                            "is missing from the chain", f->path, f->stored_in);
            else if (bad)
                vfy_problem(v, mf_header_c(m)->id, "%s: its restore needs a damaged frame of "
                            "backup %s", f->path, f->stored_in);
        }
    }
    return rc;
}

/* ---- the whole repository ----------------------------------------------------------- */

static void summary(vfy_run *v, const mf_manifest *m, size_t found, uint64_t frames)
{
    const mf_backup *h = mf_header_c(m);
    char msg[300];
    snprintf(msg, sizeof(msg), "%s (%s): %s; %" PRIu64 " frames of its own read and checked",
             h->id, h->type == 'I' ? "incr" : h->type == 'S' ? "synthetic full" : "full",
             found ? "FAILED" : "ok", frames);
    if (found > VFY_NOTES_PER_SUBJECT)
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "; %zu problems, the first %d "
                 "shown", found, VFY_NOTES_PER_SUBJECT);
    v->note(v->note_ctx, h->id, false, msg);
    v->stats->backups_failed += found != 0;
}

static int load_all(vfy_run *v, loaded *l, pb_error *err)
{
    chain_ids ids;
    int rc = chain_list(v->r, &ids, err);
    if (rc)
        return rc;
    l->ms = calloc(ids.count ? ids.count : 1, sizeof(*l->ms));
    if (!l->ms)
        rc = pb_fail(err, PB_ENOMEM, "out of memory verifying %s", repo_location(v->r));
    for (size_t i = 0; rc == 0 && i < ids.count; i++) {
        pb_error e = PB_ERROR_INIT;
        v->stats->backups++;
        int lrc = chain_load(v->r, ids.ids[i], &l->ms[l->n], &e);
        if (lrc == 0) {
            l->n++;
            continue;
        }
        v->subject_problems = 0;
        vfy_problem(v, ids.ids[i], "%s", e.msg);
        v->stats->backups_failed++;
        if (lrc == PB_ENOMEM)
            rc = pb_fail(err, lrc, "%s", e.msg);
    }
    chain_ids_free(&ids);
    return rc;
}

/* Pass 1 reads every backup's own frames (each frame once); pass 2 checks each chain
 * against what pass 1 found, and each backup's WAL, then reports the backup. */
static int verify_all(vfy_run *v, pb_error *err)
{
    loaded l = {NULL, 0};
    pack_reader *rd = NULL;
    rs_wal_view w;
    memset(&w, 0, sizeof(w));
    size_t *found = NULL;
    uint64_t *frames = NULL;
    uint8_t *frame = malloc(PACK_MAX_FRAME_RAW);
    int rc = frame ? pack_reader_new(&rd, err) : PB_ENOMEM;
    if (rc == 0)
        rc = load_all(v, &l, err);
    /* the identity file must name the cluster of every backup (one read, then compare) */
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const mf_backup *h = mf_header_c(l.ms[i]), *h0 = mf_header_c(l.ms[0]);
        pb_error e = PB_ERROR_INIT;
        if (i == 0 ? chain_verify_identity(v->r, h->system_id, h->id, &e) == 0
                   : h->system_id == h0->system_id)
            continue;
        v->subject_problems = 0;
        if (i == 0)
            vfy_problem(v, h->id, "%s", e.msg);
        else
            vfy_problem(v, h->id, "backup %s is of another cluster (system identifier %" PRIu64
                        ") than %s", h->id, h->system_id, h0->id);
    }
    if (rc == 0 && (!(found = calloc(l.n + 1, sizeof(*found))) ||
                    !(frames = calloc(l.n + 1, sizeof(*frames)))))
        rc = PB_ENOMEM;
    if (rc == 0)
        rc = rs_view_load(&w, v->r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    v->prog.files_total = l.n;
    for (size_t i = 0; i < l.n; i++)
        v->prog.bytes_total += mf_header_c(l.ms[i])->bytes_stored;
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        size_t before = v->stats->problems;
        uint64_t f0 = v->stats->frames_read, b0 = v->prog.bytes_done;
        v->subject_problems = 0;
        rc = vfy_own_frames(v, l.ms[i], rd, frame);
        found[i] = v->stats->problems - before;
        frames[i] = v->stats->frames_read - f0;
        /* the backup's stored bytes are done, pack headers and damaged frames included */
        v->prog.files_done = i + 1;
        v->prog.bytes_done = b0;
        vfy_progress(v, mf_header_c(l.ms[i])->bytes_stored);
    }
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        size_t before = v->stats->problems;
        v->subject_problems = found[i];
        rc = check_chain(v, &l, l.ms[i]);
        vfy_backup_wal(v, &w, mf_header_c(l.ms[i]));
        summary(v, l.ms[i], found[i] + v->stats->problems - before, frames[i]);
    }
    if (rc == PB_ENOMEM)
        pb_fail(err, rc, "out of memory verifying %s", repo_location(v->r));
    if (rc == 0)
        rc = vfy_wal_archive(v, &w, l.ms, l.n, err);
    for (size_t i = 0; i < l.n; i++)
        mf_free(l.ms[i]);
    free(l.ms);
    free(found);
    free(frames);
    free(v->bad);
    v->bad = NULL;
    rs_view_free(&w);
    pack_reader_free(rd);
    free(frame);
    return rc;
}

static int verify_one(vfy_run *v, const char *set, unsigned jobs, pb_error *err)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    int rc = verify_set(v->r, set, jobs, v->progress, &st, &e);
    v->stats->backups = 1;
    v->stats->frames_read = st.frames_read;
    if (rc == PB_ENOMEM || rc == PB_EREMOTE || rc == PB_EINVAL)
        return pb_fail(err, rc, "%s", e.msg);
    if (rc) {
        v->stats->backups_failed = 1;
        vfy_problem(v, set, "%s", e.msg);
        return 0;
    }
    char msg[300];
    snprintf(msg, sizeof(msg), "%s: ok; chain of %zu, %" PRIu64 " frames read and checked, "
             "WAL from its start to its stop present", st.id, st.chain_length, st.frames_read);
    v->note(v->note_ctx, st.id, false, msg);
    return 0;
}

int rs_verify_repo(repo *r, const char *set, unsigned jobs, rs_verify_note note,
                   void *note_ctx, const rs_progress_hook *progress, rs_verify_stats *stats,
                   pb_error *err)
{
    memset(stats, 0, sizeof(*stats));
    vfy_run v = {r, note, note_ctx, stats, 0, NULL, 0, 0, progress, {0, 0, 0, 0}};
    double t0 = pb_now();
    int rc = set ? verify_one(&v, set, jobs, err) : verify_all(&v, err);
    stats->seconds = pb_now() - t0;
    if (rc == 0 && stats->problems)
        rc = pb_fail(err, PB_ECORRUPT, "verify of %s found %zu problems", repo_location(r),
                     stats->problems);
    return rc;
}
