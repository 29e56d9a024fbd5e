/*
 * restore/plan_merge.c — the chain's manifests read as merged sorted streams, and the
 * per-path records copied out of the merge for the workers that rebuild them. Restore,
 * verify --set and rebase plan file by file from this merge (as pg_combinebackup's
 * reconstruct.c takes each file's source map from every manifest of the chain), so what
 * they hold of the manifests is one chunk and one record per backup of the chain plus
 * the records of the files being rebuilt, whatever the number of files (docs/MANIFEST.md,
 * "Streaming"). A version 1 manifest cannot be range-read: it is read whole.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <stdlib.h>
#include <string.h>

int rs_merge_open(repo *r, const mf_backup *hdrs, size_t n, mf_merge **out, pb_error *err)
{
    *out = NULL;
    mf_stream **s = calloc(n ? n : 1, sizeof(*s));
    if (!s)
        return pb_fail(err, PB_ENOMEM, "out of memory opening a chain of %zu manifests", n);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = chain_stream_open(r, hdrs[i].id, &s[i], err);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            mf_stream_close(s[i]);
        free(s);
        return rc;
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (strcmp(mf_stream_header(s[i])->id, hdrs[i].id) != 0 ||
            strcmp(mf_stream_header(s[i])->parent, hdrs[i].parent) != 0)
            rc = pb_fail(err, PB_ECORRUPT, "backup %s: its manifest changed while the restore "
                         "was planned", hdrs[i].id);
    if (rc == 0)
        rc = mf_merge_open(out, s, n, err); /* takes the streams, also on failure */
    else
        for (size_t i = 0; i < n; i++)
            mf_stream_close(s[i]);
    free(s);
    return rc;
}

static uint32_t shipped(const mf_file *f)
{
    uint64_t n = 0;
    for (uint32_t k = 0; f->kind == MF_REL && k < f->nruns; k++)
        n += f->runs[k].count;
    return (uint32_t)n;
}

/* A deep copy of src into dst (cleared on failure). */
static int copy_file(mf_file *dst, const mf_file *src, uint64_t *bytes)
{
    *dst = *src;
    dst->path = strdup(src->path);
    dst->link_target = src->link_target ? strdup(src->link_target) : NULL;
    size_t nh = shipped(src);
    dst->runs = src->nruns ? malloc((size_t)src->nruns * sizeof(mf_run)) : NULL;
    dst->page_hashes = nh && src->page_hashes ? malloc(nh * sizeof(uint64_t)) : NULL;
    if (!dst->path || (src->link_target && !dst->link_target) || (src->nruns && !dst->runs) ||
        (nh && src->page_hashes && !dst->page_hashes)) {
        mf_file_clear(dst);
        return PB_ENOMEM;
    }
    if (src->nruns)
        memcpy(dst->runs, src->runs, (size_t)src->nruns * sizeof(mf_run));
    if (dst->page_hashes)
        memcpy(dst->page_hashes, src->page_hashes, nh * sizeof(uint64_t));
    *bytes += sizeof(*dst) + strlen(src->path) + 1 + (size_t)src->nruns * sizeof(mf_run) +
              (dst->page_hashes ? nh * sizeof(uint64_t) : 0);
    return 0;
}

int rs_recs_copy(rs_recs *dst, const mf_file *const *src, size_t n, pb_error *err)
{
    if (dst->n != n) {
        rs_recs_free(dst);
        dst->files = calloc(n ? n : 1, sizeof(*dst->files));
        dst->ptr = calloc(n ? n : 1, sizeof(*dst->ptr));
        if (!dst->files || !dst->ptr) {
            rs_recs_free(dst);
            return pb_fail(err, PB_ENOMEM, "out of memory copying %zu manifest records", n);
        }
        dst->n = n;
    }
    rs_recs_clear(dst);
    for (size_t i = 0; i < n; i++) {
        if (!src[i])
            continue;
        if (copy_file(&dst->files[i], src[i], &dst->bytes)) {
            rs_recs_clear(dst);
            return pb_fail(err, PB_ENOMEM, "out of memory copying the records of %s",
                           src[i]->path);
        }
        dst->ptr[i] = &dst->files[i];
    }
    return 0;
}

int rs_recs_batch(mf_merge *mg, size_t nchain, rs_recs *batch, size_t max, uint64_t max_bytes,
                  size_t *n, uint64_t *bytes, bool *end, pb_error *err)
{
    *n = 0;
    *bytes = 0;
    *end = false;
    while (*n < max && *bytes < max_bytes) {
        const mf_file *const *files = NULL;
        int rc = mf_merge_next(mg, &files, err);
        if (rc <= 0) {
            *end = true;
            return rc;
        }
        const mf_file *top = files[nchain - 1];
        if (!top || (top->kind != MF_REL && top->kind != MF_FILE))
            continue;
        if ((rc = rs_recs_copy(&batch[*n], files, nchain, err)))
            return rc;
        *bytes += batch[(*n)++].bytes;
    }
    return 0;
}

void rs_recs_clear(rs_recs *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->ptr[i])
            mf_file_clear(&r->files[i]);
        r->ptr[i] = NULL;
    }
    r->bytes = 0;
}

void rs_recs_free(rs_recs *r)
{
    if (!r)
        return;
    if (r->files && r->ptr)
        rs_recs_clear(r);
    free(r->files);
    free(r->ptr);
    memset(r, 0, sizeof(*r));
}
