/*
 * restore/verify_frames.c — the frames one backup stored, each read once: every run its
 * manifest lists lives in its own packs (backup/<id>/pack/NNNNNN), so reading them all
 * for every backup reads every referenced frame of the repository exactly once. Relation
 * frames are sorted by pack and offset and fetched in range reads of up to SPAN_MAX
 * (skipping small holes), which is one request per few megabytes on object storage
 * instead of one per frame; each frame is then decoded (its checksum checked) and every
 * page hashed against the manifest. Whole files are read frame by frame in file order,
 * as their one hash covers the whole content.
 */
#include "restore/verify_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPAN_MAX (8u << 20)
#define HOLE_MAX (64u << 10)

int vfy_add_bad(vfy_run *v, const mf_manifest *m, const mf_run *run)
{
    if (PB_GROW(v->bad, &v->bad_cap, v->nbad + 1))
        return PB_ENOMEM;
    v->bad[v->nbad++] = (vfy_bad){m, run->pack_no, run->offset};
    return 0;
}

bool vfy_is_bad(const vfy_run *v, const mf_manifest *m, const mf_run *run)
{
    for (size_t i = 0; i < v->nbad; i++)
        if (v->bad[i].m == m && v->bad[i].pack_no == run->pack_no &&
            v->bad[i].offset == run->offset)
            return true;
    return false;
}

typedef struct frame_ref {
    const mf_file *f;
    const mf_run *run;
    uint32_t hash; /* index of the run's first page in f->page_hashes */
} frame_ref;

typedef struct own_ctx {
    vfy_run *v;
    const mf_manifest *m;
    const char *id;
    pack_reader *rd;
    uint8_t *frame; /* PACK_MAX_FRAME_RAW */
    uint8_t *span;
    size_t span_cap;
    char dir[128];
} own_ctx;

static int cmp_ref(const void *a, const void *b)
{
    const mf_run *x = ((const frame_ref *)a)->run, *y = ((const frame_ref *)b)->run;
    if (x->pack_no != y->pack_no)
        return x->pack_no < y->pack_no ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* A run the manifest itself gets wrong is a problem before anything is read. */
static bool run_sane(own_ctx *o, const frame_ref *ref)
{
    const mf_run *run = ref->run;
    uint64_t max_clen = PACK_FRAME_HEADER + 2ull * PACK_MAX_FRAME_RAW;
    /* several runs may share a frame: each takes its pages from page frame_page on */
    if (run->rlen % PB_PAGE_SIZE == 0 &&
        ((uint64_t)run->frame_page + run->count) * PB_PAGE_SIZE <= run->rlen &&
        run->rlen <= PACK_MAX_FRAME_RAW &&
        run->clen >= PACK_FRAME_HEADER && run->clen <= max_clen &&
        run->offset <= UINT64_MAX - run->clen)
        return true;
    vfy_problem(o->v, o->id, "%s blocks %u..%u: the manifest records an impossible frame "
                "(%u bytes stored, %u raw for %u pages, pack %u at offset %llu)", ref->f->path,
                run->first, run->first + run->count - 1, run->clen, run->rlen, run->count,
                run->pack_no, (unsigned long long)run->offset);
    return false;
}

/* Decode one relation frame from memory and check its pages. */
static int check_frame(own_ctx *o, const frame_ref *ref, const uint8_t *data)
{
    const mf_run *run = ref->run;
    char key[256], what[400];
    pack_key(key, sizeof(key), o->dir, run->pack_no);
    snprintf(what, sizeof(what), "%s frame at offset %llu", key, (unsigned long long)run->offset);
    pb_error e = PB_ERROR_INIT;
    size_t got = 0;
    int rc = pack_reader_decode(o->rd, data, run->clen, o->frame, PACK_MAX_FRAME_RAW, &got, what,
                                &e);
    if (rc == PB_ENOMEM)
        return rc;
    if (rc == 0 && got != run->rlen)
        rc = pb_fail(&e, PB_ECORRUPT, "%s holds %zu bytes, expected %u", what, got, run->rlen);
    if (rc) {
        vfy_problem(o->v, o->id, "%s (frame of %s): %s", key, ref->f->path, e.msg);
        return vfy_add_bad(o->v, o->m, run);
    }
    o->v->stats->frames_read++;
    vfy_progress(o->v, run->clen);
    const uint8_t *pages = o->frame + (size_t)run->frame_page * PB_PAGE_SIZE;
    for (uint32_t k = 0; k < run->count; k++)
        if (pb_hash64(pages + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE) !=
            ref->f->page_hashes[ref->hash + k]) {
            vfy_problem(o->v, o->id, "%s block %u fails its hash check (%s, frame at offset "
                        "%llu)", ref->f->path, run->first + k, key,
                        (unsigned long long)run->offset);
            return vfy_add_bad(o->v, o->m, run);
        }
    return 0;
}

/* refs[0..n): one pack, ascending, within SPAN_MAX: one range read. */
static int check_batch(own_ctx *o, const frame_ref *refs, size_t n)
{
    uint64_t start = refs[0].run->offset;
    size_t span = (size_t)(refs[n - 1].run->offset + refs[n - 1].run->clen - start);
    if (span > o->span_cap) {
        uint8_t *p = realloc(o->span, span);
        if (!p)
            return PB_ENOMEM;
        o->span = p;
        o->span_cap = span;
    }
    char key[256];
    pack_key(key, sizeof(key), o->dir, refs[0].run->pack_no);
    pb_error e = PB_ERROR_INIT;
    int rc = repo_get_range(o->v->r, key, start, span, o->span, &e);
    if (rc == PB_ENOMEM)
        return rc;
    for (size_t i = 0; rc && i < n; i++) {
        if (i == 0)
            vfy_problem(o->v, o->id, "%s (frames of %s and %zu more): %s", key,
                        refs[0].f->path, n - 1, e.msg);
        if (vfy_add_bad(o->v, o->m, refs[i].run))
            return PB_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_frame(o, &refs[i], o->span + (refs[i].run->offset - start));
    return rc == PB_ENOMEM ? rc : 0;
}

static bool joins(const frame_ref *first, const frame_ref *last, const frame_ref *next)
{
    uint64_t end = last->run->offset + last->run->clen;
    if (next->run->pack_no == last->run->pack_no && next->run->offset == last->run->offset &&
        next->run->clen == last->run->clen)
        return true; /* another run of the same (shared) frame */
    return next->run->pack_no == first->run->pack_no && next->run->offset >= end &&
           next->run->offset - end <= HOLE_MAX &&
           next->run->offset + next->run->clen - first->run->offset <= SPAN_MAX;
}

static int collect_refs(own_ctx *o, frame_ref **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < mf_count(o->m); i++) {
        const mf_file *f = mf_at(o->m, i);
        uint32_t h = 0;
        for (uint32_t r = 0; f->kind == MF_REL && r < f->nruns; h += f->runs[r++].count) {
            frame_ref ref = {f, &f->runs[r], h};
            if (!run_sane(o, &ref)) {
                if (vfy_add_bad(o->v, o->m, ref.run))
                    return PB_ENOMEM;
                continue;
            }
            if (PB_GROW(*out, &cap, *n + 1))
                return PB_ENOMEM;
            (*out)[(*n)++] = ref;
        }
    }
    return 0;
}

static int check_rels(own_ctx *o)
{
    frame_ref *refs = NULL;
    size_t n = 0;
    int rc = collect_refs(o, &refs, &n);
    if (rc == 0 && n > 1)
        qsort(refs, n, sizeof(*refs), cmp_ref);
    for (size_t i = 0, j; rc == 0 && i < n; i = j) {
        for (j = i + 1; j < n && joins(&refs[i], &refs[j - 1], &refs[j]);)
            j++;
        rc = check_batch(o, refs + i, j - i);
    }
    free(refs);
    return rc;
}

/* A whole file, frame by frame in file order: its one hash covers the whole content. */
static int check_whole(own_ctx *o, const mf_file *f)
{
    pb_hasher *hs = pb_hasher_new();
    if (!hs)
        return PB_ENOMEM;
    uint64_t size = 0;
    int rc = 0;
    bool ok = true;
    for (uint32_t r = 0; ok && r < f->nruns; r++) {
        const mf_run *run = &f->runs[r];
        pack_loc loc = {run->pack_no, run->offset, run->clen, run->rlen};
        pb_error e = PB_ERROR_INIT;
        rc = pack_reader_read(o->rd, o->v->r, o->dir, &loc, o->frame, PACK_MAX_FRAME_RAW, &e);
        ok = rc == 0;
        if (rc == PB_ENOMEM)
            break;
        if (ok) {
            o->v->stats->frames_read++;
            vfy_progress(o->v, run->clen);
            pb_hasher_update(hs, o->frame, run->rlen);
        } else {
            vfy_problem(o->v, o->id, "%s (frame of %s): %s", o->dir, f->path, e.msg);
        }
        rc = 0;
        size += run->rlen;
    }
    if (rc == 0 && ok && (pb_hasher_digest(hs) != f->hash || size != f->size)) {
        vfy_problem(o->v, o->id, "%s fails its hash check (stored in %s)", f->path, o->dir);
        ok = false;
    }
    if (rc == 0 && !ok && f->nruns)
        rc = vfy_add_bad(o->v, o->m, &f->runs[0]);
    pb_hasher_free(hs);
    return rc;
}

int vfy_own_frames(vfy_run *v, const mf_manifest *m, pack_reader *rd, uint8_t *frame)
{
    own_ctx o = {v, m, mf_header_c(m)->id, rd, frame, NULL, 0, ""};
    chain_backup_dir(o.dir, sizeof(o.dir), o.id);
    int rc = check_rels(&o);
    for (size_t i = 0; rc == 0 && i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        if (f->kind == MF_FILE && strcmp(f->stored_in, o.id) == 0)
            rc = check_whole(&o, f);
    }
    free(o.span);
    return rc;
}
