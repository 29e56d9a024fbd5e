/*
 * tests/unit/restore/plan_stream.c — a model of restore and verify planning over
 * manifests read as streams (docs/MANIFEST.md, "Streaming"): the chain's manifests are
 * merged as sorted streams and each file of the restored backup gets its per-page source
 * map (which backup of the chain holds each page, as pg_combinebackup's reconstruct.c
 * decides per block), then is dropped. Memory: one chunk and one record per manifest,
 * plus one source map (2 bytes a page, at most MF_REL_MAX_PAGES pages), whatever the
 * number of files.
 */
#include "tests/unit/restore/plan_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_SOURCE UINT16_MAX

typedef struct src_map {
    uint16_t *src; /* page -> chain index */
    size_t cap;
} src_map;

/* Frames and bytes of the runs of f that the map takes pages from (src == i); runs
 * sharing one frame (format v2 frame_page) count it once. */
static void count_frames(const mf_file *f, const uint16_t *src, uint16_t i, uint32_t n,
                         rs_stream_stats *st)
{
    uint64_t last_off = UINT64_MAX;
    uint32_t last_pack = UINT32_MAX;
    for (uint32_t k = 0; k < f->nruns; k++) {
        const mf_run *r = &f->runs[k];
        bool used = false;
        for (uint32_t p = r->first; p < r->first + r->count && p < n && !used; p++)
            used = src[p] == i;
        if (!used || (r->pack_no == last_pack && r->offset == last_off))
            continue;
        st->frames++;
        st->bytes += r->clen;
        last_pack = r->pack_no;
        last_off = r->offset;
    }
}

/* Newest first, each page from the newest backup that shipped it; a backup without
 * the file (or with it as another kind) ends the walk: what is older is another file. */
static int plan_rel(const mf_file *const *files, size_t n, src_map *m, rs_stream_stats *st,
                    pb_error *err)
{
    const mf_file *top = files[n - 1];
    uint32_t np = top->npages, left = np;
    if (np > m->cap) {
        uint16_t *g = realloc(m->src, (size_t)np * sizeof(*g));
        if (!g)
            return pb_fail(err, PB_ENOMEM, "restore plan: file %s: %u pages", top->path, np);
        m->src = g;
        m->cap = np;
    }
    for (uint32_t p = 0; p < np; p++)
        m->src[p] = NO_SOURCE;
    for (size_t i = n; i-- > 0 && left;) {
        const mf_file *f = files[i];
        if (!f || f->kind != MF_REL)
            break;
        for (uint32_t k = 0; k < f->nruns; k++)
            for (uint32_t p = f->runs[k].first; p < f->runs[k].first + f->runs[k].count &&
                                                 p < np; p++)
                if (m->src[p] == NO_SOURCE) {
                    m->src[p] = (uint16_t)i;
                    left--;
                }
        count_frames(f, m->src, (uint16_t)i, np, st);
    }
    if (left)
        return pb_fail(err, PB_ECORRUPT, "restore plan: file %s: %u of its %u pages are "
                       "held by no backup of the chain", top->path, left, np);
    st->pages += np;
    st->rel_files++;
    return 0;
}

int rs_plan_chain_stream(mf_stream **chain, size_t n, rs_stream_stats *st, pb_error *err)
{
    memset(st, 0, sizeof(*st));
    if (n == 0 || n >= NO_SOURCE) {
        for (size_t i = 0; i < n; i++)
            mf_stream_close(chain[i]);
        return pb_fail(err, PB_EINVAL, "restore plan: a chain of %zu backups", n);
    }
    mf_merge *mg = NULL;
    int rc = mf_merge_open(&mg, chain, n, err);
    src_map map = {0};
    const mf_file *const *files;
    while (rc == 0 && (rc = mf_merge_next(mg, &files, err)) == 1) {
        rc = 0;
        const mf_file *top = files[n - 1];
        if (!top)
            continue; /* not in the restored backup: nothing to restore */
        st->files++;
        if (top->kind == MF_REL) {
            rc = plan_rel(files, n, &map, st, err);
        } else if (top->kind == MF_FILE) {
            st->frames += top->nruns;
            for (uint32_t k = 0; k < top->nruns; k++)
                st->bytes += top->runs[k].clen;
        }
    }
    if (mg)
        st->peak_held = mf_merge_peak(mg);
    st->peak_held += map.cap * sizeof(*map.src);
    free(map.src);
    mf_merge_close(mg);
    return rc;
}

int rs_plan_verify_stream(mf_stream *s, rs_stream_stats *st, pb_error *err)
{
    mf_file f;
    int rc;
    while ((rc = mf_stream_next(s, &f, err)) == 1) {
        st->files++;
        uint64_t last_off = UINT64_MAX;
        uint32_t last_pack = UINT32_MAX;
        for (uint32_t k = 0; k < f.nruns; k++) {
            const mf_run *r = &f.runs[k];
            if (f.kind == MF_REL)
                st->pages += r->count;
            if (r->pack_no == last_pack && r->offset == last_off)
                continue; /* a frame shared with the run before */
            st->frames++;
            st->bytes += r->clen;
            last_pack = r->pack_no;
            last_off = r->offset;
        }
        st->rel_files += f.kind == MF_REL;
        mf_file_clear(&f);
    }
    uint64_t held = mf_stream_peak(s);
    if (held > st->peak_held)
        st->peak_held = held;
    return rc;
}
