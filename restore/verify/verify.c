/*
 * restore/verify/verify.c — verify backups without writing anything.
 *
 * rs_verify checks one backup as its restore would read it: the whole chain rebuilt
 * through the restore path (every needed frame read once, every page hash checked) and
 * the WAL from its start to its stop. rs_verify_repo with no set checks the repository
 * as a whole, as pgBackRest's verify does: each manifest's header is read once, and its
 * records streamed (never held whole: docs/MANIFEST.md, "Streaming"); each backup's own
 * frames (the runs its manifest lists, which live in its own packs) are read once
 * (verify_frames.c), so a frame that many backups of a chain rely on is read once per
 * run; and each chain is checked to be complete (every page of every file has a source,
 * every whole file its stored copy) over the chain's manifests merged as sorted streams
 * (plan_merge.c). A restore reads only frames of its chain, so together these cover
 * what any restore of any listed backup would read. The WAL archive is verify_wal.c.
 */
#include "restore/verify/verify_internal.h"
#include "restore/plan.h"
#include "restore/srcmap.h"

#include "engine/wal/wal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int verify_set(repo *r, const char *set, unsigned jobs, const rs_progress_hook *hook,
                      rs_stats *stats, pb_error *err)
{
    rs_plan *p = NULL;
    rs_ctx ctx;
    rs_outline ol = {0};
    mf_merge *mg = NULL;
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    rs_opts o = RS_OPTS_INIT;
    o.set = set;
    double t0 = pb_now();
    /* WAL start..stop (one listing, every segment read and decoded) and the manifest's
     * entries, as a restore checks them */
    int rc = rs_set_open(r, &o, RS_OPEN_WAL | RS_OPEN_OUTLINE, NULL, &p, &ol, err);
    if (!p)
        return rc;
    rs_ctx_init(&ctx, r, p, stats);
    ctx.progress = hook ? hook->fn : NULL; /* file by file, as a restore */
    ctx.progress_ctx = hook ? hook->ctx : NULL;
    if (rc == 0)
        rc = rs_merge_open(r, p->hdrs, p->nchain, &mg, err);
    if (rc == 0)
        rc = rs_rebuild_parallel(&ctx, mg, &ol.totals, jobs, err);
    if (rc)
        pb_error_wrap(err, "verifying backup %s", p->id);
    stats->manifest_peak += ol.peak + (mg ? mf_merge_peak(mg) : 0);
    snprintf(stats->id, sizeof(stats->id), "%s", p->id);
    stats->chain_length = p->nchain;
    mf_merge_close(mg);
    rs_outline_free(&ol);
    stats->seconds = pb_now() - t0;
    rs_ctx_free_buffers(&ctx);
    rs_plan_free(p);
    return rc;
}

int rs_verify(repo *r, const char *set, unsigned jobs, rs_stats *stats, pb_error *err)
{
    return verify_set(r, set, jobs, NULL, stats, err);
}

/* ---- each chain complete ------------------------------------------------------------ */

/* The backups the run could read: headers in id order; broken[i] when backup i's
 * manifest could not be read to its end (pass 1), so no chain may use it. */
typedef struct loaded {
    mf_backup *hs;
    bool *broken;
    size_t n;
} loaded;

static size_t find_loaded(const loaded *l, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (!l->broken[i] && strcmp(l->hs[i].id, id) == 0)
            return i;
    return SIZE_MAX;
}

/* The chain of backup b, oldest first into out[] (its headers) and idx[] (their indexes);
 * a missing parent is noted and gives 0. */
static size_t chain_of(vfy_run *v, const loaded *l, size_t b, mf_backup *out, size_t *idx,
                       size_t cap)
{
    size_t n = 0, at = b;
    bool complete = false;
    while (at != SIZE_MAX && n < cap && !complete) {
        idx[n++] = at;
        const char *parent = l->hs[at].parent;
        if (!(complete = !parent[0]) && (at = find_loaded(l, parent)) == SIZE_MAX)
            vfy_problem(v, l->hs[b].id, "its chain needs backup %s (parent of %s), which is "
                        "missing or unreadable (backup/%s/manifest)", parent,
                        l->hs[idx[n - 1]].id, parent);
    }
    if (!complete && at != SIZE_MAX)
        vfy_problem(v, l->hs[b].id, "its chain is longer than %zu backups (a loop?)", cap);
    if (!complete)
        return 0;
    for (size_t i = 0; i < n / 2; i++) {
        size_t t = idx[i];
        idx[i] = idx[n - 1 - i];
        idx[n - 1 - i] = t;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = l->hs[idx[i]];
    return n;
}

/* The newest backup of the chain below the verified one whose damaged frame the map's
 * window takes a page from, or bad_in when it is newer (SIZE_MAX: none yet). */
static size_t bad_source(const vfy_run *v, const mf_file *const *recs, const size_t *idx,
                         size_t n, const rs_srcmap *m, size_t bad_in)
{
    const mf_file *f = recs[n - 1];
    for (size_t i = n - 1; i-- > 0 && (bad_in == SIZE_MAX || i > bad_in);) {
        const mf_file *fi = recs[i];
        for (uint32_t r = 0; fi && r < fi->nruns; r++)
            if (vfy_is_bad(v, idx[i], &fi->runs[r]) &&
                rs_srcmap_needs(m, &fi->runs[r], f, (uint32_t)i))
                return i;
    }
    return bad_in;
}

/* Every page has a source, as the restore maps a file (restore/srcmap.c), a window at a
 * time. recs[0..n) are the chain's records of the file, oldest first (idx: their
 * backups). Pages an older backup of the chain holds in a failed frame make this backup
 * unrestorable too: named once per file. */
static int rel_covered(vfy_run *v, const mf_file *const *recs, const mf_backup *ch,
                       const size_t *idx, size_t n)
{
    const char *id = ch[n - 1].id;
    const mf_file *f = recs[n - 1];
    uint32_t wpages = f->npages < RS_SRCMAP_WINDOW ? f->npages : RS_SRCMAP_WINDOW;
    rs_src *src = calloc(wpages ? wpages : 1, sizeof(*src));
    if (!src)
        return PB_ENOMEM;
    uint32_t missing = 0, first = UINT32_MAX;
    size_t bad_in = SIZE_MAX;
    for (uint64_t lo = 0; lo < f->npages; lo += wpages) {
        uint64_t hi = lo + wpages < f->npages ? lo + wpages : f->npages;
        rs_srcmap m = {src, {(uint32_t)lo, (uint32_t)hi}, 0};
        uint32_t left = rs_srcmap_fill(&m, recs, n);
        for (uint32_t p = m.w.first; left && first == UINT32_MAX && p < m.w.end; p++)
            if (src[p - m.w.first].backup == RS_NO_SOURCE)
                first = p;
        missing += left;
        if (v->nbad)
            bad_in = bad_source(v, recs, idx, n, &m, bad_in);
    }
    if (missing)
        vfy_problem(v, id, "%s block %u has no source in its chain (%u blocks missing)",
                    f->path, first, missing);
    if (bad_in != SIZE_MAX)
        vfy_problem(v, id, "%s: its restore needs a damaged frame of backup %s", f->path,
                    ch[bad_in].id);
    free(src);
    return 0;
}

/* A whole file: its stored copy is the record of the backup it names, in the chain. */
static void whole_covered(vfy_run *v, const mf_file *const *recs, const mf_backup *ch,
                          const size_t *idx, size_t n)
{
    const mf_file *f = recs[n - 1], *fs = NULL;
    size_t k = 0;
    for (; k < n && !fs; k++)
        if (strcmp(ch[k].id, f->stored_in) == 0)
            fs = recs[k];
    bool bad = false;
    for (uint32_t r = 0; fs && k != n && v->nbad && r < fs->nruns && !bad; r++)
        bad = vfy_is_bad(v, idx[k - 1], &fs->runs[r]);
    if (!fs || fs->kind != MF_FILE || fs->hash != f->hash)
        vfy_problem(v, ch[n - 1].id, "%s: its content, recorded in backup %s, is missing "
                    "from the chain", f->path, f->stored_in);
    else if (bad)
        vfy_problem(v, ch[n - 1].id, "%s: its restore needs a damaged frame of backup %s",
                    f->path, f->stored_in);
}

/* Every path of the chain's merged streams that backup b holds: a valid entry, and a
 * source in the chain for each of its pages or its whole content. */
static int check_merged(vfy_run *v, const mf_backup *ch, const size_t *idx, size_t n)
{
    const char *id = ch[n - 1].id;
    mf_merge *mg = NULL;
    pb_error e = PB_ERROR_INIT;
    const mf_file *const *recs = NULL;
    bool entry_noted = false;
    int rc = rs_merge_open(v->r, ch, n, &mg, &e), mrc = 0;
    while (rc == 0 && (mrc = mf_merge_next(mg, &recs, &e)) == 1) {
        const mf_file *f = recs[n - 1];
        if (!f)
            continue;
        pb_error ce = PB_ERROR_INIT;
        if (!entry_noted && rs_check_entry(f, &ce) != 0) { /* what a restore refuses */
            vfy_problem(v, id, "backup/%s/manifest: backup %s: %s", id, id, ce.msg);
            entry_noted = true;
        }
        if (f->kind == MF_REL)
            rc = rel_covered(v, recs, ch, idx, n);
        else if (f->kind == MF_FILE)
            whole_covered(v, recs, ch, idx, n);
    }
    if (rc == 0 && mrc < 0)
        rc = mrc;
    if (rc && rc != PB_ENOMEM) {
        vfy_problem(v, id, "its chain's manifests cannot be read: %s", e.msg);
        rc = 0;
    }
    if (mg && mf_merge_peak(mg) > v->manifest_peak)
        v->manifest_peak = mf_merge_peak(mg);
    mf_merge_close(mg);
    return rc;
}

#define VFY_CHAIN_MAX 4096

static int check_chain(vfy_run *v, const loaded *l, size_t b)
{
    mf_backup *ch = malloc(VFY_CHAIN_MAX * sizeof(*ch));
    size_t *idx = malloc(VFY_CHAIN_MAX * sizeof(*idx));
    int rc = ch && idx ? 0 : PB_ENOMEM;
    size_t n = rc ? 0 : chain_of(v, l, b, ch, idx, VFY_CHAIN_MAX);
    pb_error e = PB_ERROR_INIT;
    if (rc == 0 && rs_db_list_check(v->r, l->hs[b].id, &e) != 0) /* restore --db-include's */
        vfy_problem(v, l->hs[b].id, "%s", e.msg);
    if (rc == 0 && n)
        rc = check_merged(v, ch, idx, n);
    free(ch);
    free(idx);
    return rc;
}

/* ---- the whole repository ----------------------------------------------------------- */

static void summary(vfy_run *v, const mf_backup *h, size_t found, uint64_t frames)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "%s (%s): %s; %" PRIu64 " %s of its own read and checked",
             h->id, h->type == 'I' ? "incr" : h->type == 'S' ? "synthetic full" : "full",
             found ? "FAILED" : "ok", frames, pb_plural(frames, "frame", "frames"));
    if (found > VFY_NOTES_PER_SUBJECT)
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "; %zu problems, the first %d "
                 "shown", found, VFY_NOTES_PER_SUBJECT);
    v->note(v->note_ctx, h->id, false, msg);
    v->stats->backups_failed += found != 0;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The record of committed backups (engine/chain/chain_record.c) against the manifests listed:
 * a listed backup without a manifest lost it to damage, a failed backup of the run; a
 * record copy that fails its check is a problem of the record. */
static int check_record(vfy_run *v, const chain_ids *ids, pb_error *err)
{
    chain_record rec = {0};
    pb_error e = PB_ERROR_INIT;
    int rc = chain_record_load(v->r, &rec, &e);
    v->subject_problems = 0;
    if (rc == PB_ENOMEM)
        return pb_fail(err, rc, "%s", e.msg);
    if (rc)
        vfy_problem(v, CHAIN_RECORD_KEY, "%s", e.msg);
    else if (rec.damaged[0])
        vfy_problem(v, CHAIN_RECORD_KEY, "%s/%s failed its check (its copy %s was read)",
                    repo_location(v->r), rec.damaged, CHAIN_RECORD_COPY_KEY);
    for (size_t i = 0; rc == 0 && i < rec.count; i++) {
        if (ids->count && bsearch(rec.ids[i], ids->ids, ids->count, sizeof(*ids->ids), cmp_id))
            continue;
        v->stats->backups++;
        v->stats->backups_failed++;
        v->subject_problems = 0;
        vfy_problem(v, rec.ids[i], "backup %s is listed in %s/%s as committed, but its "
                    "manifest backup/%s/manifest is missing", rec.ids[i], repo_location(v->r),
                    CHAIN_RECORD_KEY, rec.ids[i]);
    }
    chain_record_free(&rec);
    return 0;
}

/* Every backup's header (version 2: two small reads); an unreadable one is a problem. */
static int load_all(vfy_run *v, loaded *l, pb_error *err)
{
    chain_ids ids;
    int rc = chain_list(v->r, &ids, err);
    if (rc)
        return rc;
    if ((rc = check_record(v, &ids, err)) != 0) {
        chain_ids_free(&ids);
        return rc;
    }
    l->hs = calloc(ids.count ? ids.count : 1, sizeof(*l->hs));
    l->broken = calloc(ids.count ? ids.count : 1, sizeof(*l->broken));
    if (!l->hs || !l->broken)
        rc = pb_fail(err, PB_ENOMEM, "out of memory verifying %s", repo_location(v->r));
    for (size_t i = 0; rc == 0 && i < ids.count; i++) {
        pb_error e = PB_ERROR_INIT;
        v->stats->backups++;
        int lrc = chain_load_header(v->r, ids.ids[i], &l->hs[l->n], &e);
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

/* The identity file must name the cluster of every backup (one read, then compare). */
static void check_identity(vfy_run *v, const loaded *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const mf_backup *h = &l->hs[i], *h0 = &l->hs[0];
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
}

/* Pass 1 reads every backup's own frames (each frame once); pass 2 checks each chain
 * against what pass 1 found, and each backup's WAL, then reports the backup. */
static int passes(vfy_run *v, loaded *l, rs_wal_view *w, size_t *found, uint64_t *frames)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        size_t before = v->stats->problems;
        uint64_t f0 = v->stats->frames_read, b0 = v->prog.bytes_done;
        v->subject_problems = 0;
        rc = vfy_own_frames(v, &l->hs[i], i, &l->broken[i]);
        found[i] = v->stats->problems - before;
        frames[i] = v->stats->frames_read - f0;
        /* the backup's stored bytes are done, pack headers and damaged frames included */
        v->prog.files_done = i + 1;
        v->prog.bytes_done = b0;
        vfy_progress(v, l->hs[i].bytes_stored);
    }
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        if (l->broken[i]) { /* its manifest is unreadable: named in pass 1 */
            v->stats->backups_failed++;
            continue;
        }
        size_t before = v->stats->problems;
        v->subject_problems = found[i];
        rc = check_chain(v, l, i);
        vfy_backup_wal(v, w, &l->hs[i]);
        summary(v, &l->hs[i], found[i] + v->stats->problems - before, frames[i]);
    }
    return rc;
}

static int verify_all(vfy_run *v, pb_error *err)
{
    loaded l = {NULL, NULL, 0};
    rs_wal_view w;
    memset(&w, 0, sizeof(w));
    size_t *found = NULL;
    uint64_t *frames = NULL;
    int rc = (v->frame = malloc(PACK_MAX_FRAME_RAW)) ? pack_reader_new(&v->rd, err) : PB_ENOMEM;
    if (rc == 0)
        rc = pack_source_new(&v->src, v->r, err);
    if (rc == 0)
        rc = load_all(v, &l, err);
    if (rc == 0)
        check_identity(v, &l);
    if (rc == 0 && (!(found = calloc(l.n + 1, sizeof(*found))) ||
                    !(frames = calloc(l.n + 1, sizeof(*frames)))))
        rc = PB_ENOMEM;
    if (rc == 0)
        rc = rs_view_load(&w, v->r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    v->prog.files_total = l.n;
    for (size_t i = 0; i < l.n; i++)
        v->prog.bytes_total += l.hs[i].bytes_stored;
    if (rc == 0)
        rc = passes(v, &l, &w, found, frames);
    if (rc == PB_ENOMEM)
        pb_fail(err, rc, "out of memory verifying %s", repo_location(v->r));
    if (rc == 0)
        rc = vfy_wal_archive(v, &w, l.hs, l.n, err);
    free(l.hs);
    free(l.broken);
    free(found);
    free(frames);
    free(v->bad);
    v->bad = NULL;
    rs_view_free(&w);
    pack_reader_free(v->rd);
    pack_source_free(v->src);
    free(v->frame);
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
    snprintf(msg, sizeof(msg), "%s: ok; chain of %zu, %" PRIu64 " %s read and checked, "
             "WAL from its start to its stop present", st.id, st.chain_length, st.frames_read,
             pb_plural(st.frames_read, "frame", "frames"));
    v->note(v->note_ctx, st.id, false, msg);
    return 0;
}

int rs_verify_repo(repo *r, const char *set, unsigned jobs, rs_verify_note note,
                   void *note_ctx, const rs_progress_hook *progress, rs_verify_stats *stats,
                   pb_error *err)
{
    memset(stats, 0, sizeof(*stats));
    vfy_run v = {r, note, note_ctx, stats, 0, NULL, 0, 0, NULL, NULL, NULL, 0, progress,
                 {0, 0, 0, 0}};
    double t0 = pb_now();
    int rc = set ? verify_one(&v, set, jobs, err) : verify_all(&v, err);
    stats->seconds = pb_now() - t0;
    stats->manifest_peak = v.manifest_peak;
    if (rc == 0 && stats->problems)
        rc = pb_fail(err, PB_ECORRUPT, "verify of %s found %zu %s", repo_location(r),
                     stats->problems, pb_plural(stats->problems, "problem", "problems"));
    return rc;
}
