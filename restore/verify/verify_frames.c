/*
 * restore/verify/verify_frames.c — the frames one backup stored, each read once: every run its
 * manifest lists lives in its own packs (backup/<id>/pack/NNNNNN), so reading them all
 * for every backup reads every referenced frame of the repository exactly once. The
 * manifest is read as a stream, and its relation records are taken a window at a time
 * (at most WINDOW_FILES records or WINDOW_BYTES of runs and page hashes), so what verify
 * holds does not grow with the backup. A window's frames are sorted by pack and offset
 * and read through the pack reader of engine/pack/pack_read.c (pack_plan coalesces them into
 * a few large range reads across small gaps, pack_source serves them), which is one
 * request per few megabytes on object storage instead of one per frame; each frame is
 * then decoded (its checksum checked) and every page hashed against the manifest. Whole
 * files are read frame by frame in file order, as their one hash covers the whole
 * content.
 */
#include "restore/verify/verify_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_FILES 256u
#define WINDOW_BYTES (4u << 20)

typedef struct frame_ref {
    const mf_file *f;
    const mf_run *run;
    uint32_t hash; /* index of the run's first page in f->page_hashes */
} frame_ref;

typedef struct own_ctx {
    vfy_run *v;
    size_t b;
    const char *id;
    char dir[128];
    mf_file *win; /* the window: relation records of the manifest, owned */
    size_t nwin, wcap;
    uint64_t wbytes, wpeak;
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
    char key[256];
    pb_error ignored = PB_ERROR_INIT;
    pack_key(key, sizeof(key), o->dir, run->pack_no);
    if (run->rlen % PB_PAGE_SIZE == 0 &&
        ((uint64_t)run->frame_page + run->count) * PB_PAGE_SIZE <= run->rlen &&
        run->rlen <= PACK_MAX_FRAME_RAW &&
        run->clen >= PACK_FRAME_HEADER && run->clen <= max_clen &&
        run->offset <= UINT64_MAX - run->clen &&
        pack_loc_check(key, run->offset, run->clen, run->rlen, &ignored) == 0)
        return true; /* pack_plan would refuse it with its neighbours */
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
    int rc = pack_reader_decode(o->v->rd, data, run->clen, o->v->frame, PACK_MAX_FRAME_RAW, &got,
                                what, &e);
    if (rc == PB_ENOMEM)
        return rc;
    if (rc == 0 && got != run->rlen)
        rc = pb_fail(&e, PB_ECORRUPT, "%s holds %zu bytes, expected %u", what, got, run->rlen);
    if (rc) {
        vfy_problem(o->v, o->id, "%s (frame of %s): %s", key, ref->f->path, e.msg);
        return vfy_add_bad(o->v, o->b, run);
    }
    o->v->stats->frames_read++;
    vfy_progress(o->v, run->clen);
    const uint8_t *pages = o->v->frame + (size_t)run->frame_page * PB_PAGE_SIZE;
    for (uint32_t k = 0; k < run->count; k++)
        if (pb_hash64(pages + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE) !=
            ref->f->page_hashes[ref->hash + k]) {
            vfy_problem(o->v, o->id, "%s block %u fails its hash check (%s, frame at offset "
                        "%llu)", ref->f->path, run->first + k, key,
                        (unsigned long long)run->offset);
            return vfy_add_bad(o->v, o->b, run);
        }
    return 0;
}

/* The frames refs[0..n) of one range of a plan, read with one fetch. */
static int check_range(own_ctx *o, const char *key, const frame_ref *refs,
                       const pack_range *rg)
{
    const uint8_t *data = NULL;
    pb_error e = PB_ERROR_INIT;
    int rc = pack_source_fetch(o->v->src, key, rg->start, (size_t)rg->len, &data, &e);
    if (rc == PB_ENOMEM)
        return rc;
    for (size_t i = rg->first; rc && i < rg->first + rg->count; i++) {
        if (i == rg->first)
            vfy_problem(o->v, o->id, "%s (frames of %s and %zu more): %s", key,
                        refs[i].f->path, rg->count - 1, e.msg);
        if (vfy_add_bad(o->v, o->b, refs[i].run))
            return PB_ENOMEM;
    }
    for (size_t i = rg->first; rc == 0 && i < rg->first + rg->count; i++)
        rc = check_frame(o, &refs[i], data + (refs[i].run->offset - rg->start));
    return rc == PB_ENOMEM ? rc : 0;
}

/* refs[0..n): the frames of one pack, by offset: planned (pack_plan), then read. */
static int check_pack(own_ctx *o, const frame_ref *refs, size_t n)
{
    pack_loc *locs = malloc(n * sizeof(*locs));
    pack_range *ranges = malloc(n * sizeof(*ranges));
    int rc = locs && ranges ? 0 : PB_ENOMEM;
    char key[256];
    pack_key(key, sizeof(key), o->dir, refs[0].run->pack_no);
    for (size_t i = 0; rc == 0 && i < n; i++)
        locs[i] = (pack_loc){refs[i].run->pack_no, refs[i].run->offset, refs[i].run->clen,
                             refs[i].run->rlen};
    size_t nr = 0;
    pb_error e = PB_ERROR_INIT;
    if (rc == 0 && pack_plan(key, locs, n, ranges, &nr, &e) != 0) {
        vfy_problem(o->v, o->id, "%s (frames of %s and %zu more): %s", key, refs[0].f->path,
                    n - 1, e.msg);
        for (size_t i = 0; rc == 0 && i < n; i++)
            rc = vfy_add_bad(o->v, o->b, refs[i].run);
        nr = 0;
    }
    for (size_t r = 0; rc == 0 && r < nr; r++)
        rc = check_range(o, key, refs, &ranges[r]);
    free(locs);
    free(ranges);
    return rc;
}

static int collect_refs(own_ctx *o, frame_ref **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < o->nwin; i++) {
        const mf_file *f = &o->win[i];
        uint32_t h = 0;
        for (uint32_t r = 0; r < f->nruns; h += f->runs[r++].count) {
            frame_ref ref = {f, &f->runs[r], h};
            if (!run_sane(o, &ref)) {
                if (vfy_add_bad(o->v, o->b, ref.run))
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

/* The window's frames, pack by pack; then the window is emptied. */
static int check_window(own_ctx *o)
{
    frame_ref *refs = NULL;
    size_t n = 0;
    int rc = collect_refs(o, &refs, &n);
    if (rc == 0 && n > 1)
        qsort(refs, n, sizeof(*refs), cmp_ref);
    for (size_t i = 0, j; rc == 0 && i < n; i = j) {
        for (j = i + 1; j < n && refs[j].run->pack_no == refs[i].run->pack_no;)
            j++;
        rc = check_pack(o, refs + i, j - i);
    }
    uint64_t held = o->wbytes + n * sizeof(*refs);
    if (held > o->wpeak)
        o->wpeak = held;
    free(refs);
    for (size_t i = 0; i < o->nwin; i++)
        mf_file_clear(&o->win[i]);
    o->nwin = 0;
    o->wbytes = 0;
    return rc;
}

/* A relation record into the window (taken: f is cleared). */
static int window_add(own_ctx *o, mf_file *f)
{
    if (PB_GROW(o->win, &o->wcap, o->nwin + 1))
        return PB_ENOMEM;
    uint64_t pages = 0;
    for (uint32_t r = 0; r < f->nruns; r++)
        pages += f->runs[r].count;
    o->wbytes += sizeof(*f) + strlen(f->path) + 1 + (uint64_t)f->nruns * sizeof(mf_run) +
                 pages * sizeof(uint64_t);
    o->win[o->nwin++] = *f;
    memset(f, 0, sizeof(*f));
    return o->nwin >= WINDOW_FILES || o->wbytes >= WINDOW_BYTES ? check_window(o) : 0;
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
        rc = pack_reader_read(o->v->rd, o->v->r, o->dir, &loc, o->v->frame, PACK_MAX_FRAME_RAW,
                              &e);
        ok = rc == 0;
        if (rc == PB_ENOMEM)
            break;
        if (ok) {
            o->v->stats->frames_read++;
            vfy_progress(o->v, run->clen);
            pb_hasher_update(hs, o->v->frame, run->rlen);
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
        rc = vfy_add_bad(o->v, o->b, &f->runs[0]);
    pb_hasher_free(hs);
    return rc;
}

/* The records of the manifest stream s: own whole files checked as they come,
 * relations a window at a time. A stream error is noted (*broken). */
static int check_stream(own_ctx *o, mf_stream *s, bool *broken)
{
    mf_file f;
    pb_error e = PB_ERROR_INIT;
    int rc = 0, nrc;
    while (rc == 0 && (nrc = mf_stream_next(s, &f, &e)) == 1) {
        if (f.kind == MF_FILE && strcmp(f.stored_in, o->id) == 0)
            rc = check_whole(o, &f);
        if (rc == 0 && f.kind == MF_REL && f.nruns)
            rc = window_add(o, &f);
        mf_file_clear(&f);
    }
    if (rc == 0 && nrc < 0) {
        vfy_problem(o->v, o->id, "%s", e.msg);
        *broken = true;
        rc = nrc == PB_ENOMEM ? nrc : 0;
    }
    return rc ? rc : check_window(o); /* what was read is checked, also when broken */
}

int vfy_own_frames(vfy_run *v, const mf_backup *h, size_t b, bool *broken)
{
    own_ctx o = {v, b, h->id, "", NULL, 0, 0, 0, 0};
    chain_backup_dir(o.dir, sizeof(o.dir), o.id);
    *broken = false;
    mf_stream *s = NULL;
    pb_error e = PB_ERROR_INIT;
    int rc = chain_stream_open(v->r, h->id, &s, &e);
    if (rc) {
        vfy_problem(v, o.id, "%s", e.msg);
        *broken = true;
        return rc == PB_ENOMEM ? rc : 0;
    }
    rc = check_stream(&o, s, broken);
    uint64_t held = mf_stream_peak(s) + o.wpeak + o.wcap * sizeof(*o.win);
    if (held > v->manifest_peak)
        v->manifest_peak = held;
    mf_stream_close(s);
    for (size_t i = 0; i < o.nwin; i++)
        mf_file_clear(&o.win[i]);
    free(o.win);
    return rc;
}
