/*
 * manifest/catalog_apply.c — making a manifest the catalog's new head (docs/MANIFEST.md,
 * "RocksDB catalog": full and incremental apply) in write batches of bounded size.
 *
 * Atomic as a whole although written in several batches: the first batch removes the
 * head pointer "S" and the last one writes it, so until the last write lands the
 * catalog has no head, and a catalog without a head is never trusted (the backup
 * rebuilds it from the repository, DESIGN rule 7). Reads come from a snapshot taken
 * before the first write, so the old head's values stay readable throughout.
 */
#include "manifest/catalog_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- apply ---- */

typedef struct apply_ctx {
    mf_catalog *c;
    const char *id;
    bool full;
    rocksdb_writebatch_t *batch;
    rocksdb_iterator_t *hit; /* old "H" chunks (incremental only) */
    uint64_t *cur;           /* the chunk being built */
    uint64_t *old;           /* the head's version of it, once loaded */
    uint8_t *val;            /* cur encoded */
    mf_apply_stats st;
    pb_error *err;
} apply_ctx;

/* Chunk ci of f as the head has it, into a->old. */
static int load_old_chunk(apply_ctx *a, const char *path, uint64_t ci, uint32_t n)
{
    char key[KEY_MAX];
    size_t klen = mfc_key_h(key, path, strlen(path), (uint32_t)ci), got_klen, vlen;
    rocksdb_iter_seek(a->hit, key, klen);
    const char *k = rocksdb_iter_valid(a->hit) ? rocksdb_iter_key(a->hit, &got_klen) : NULL;
    const char *v = k ? rocksdb_iter_value(a->hit, &vlen) : NULL;
    if (!k || got_klen != klen || memcmp(k, key, klen) != 0 || vlen != (size_t)n * 8) {
        char *e = NULL;
        rocksdb_iter_get_error(a->hit, &e);
        if (e)
            return mfc_db_fail(a->c, a->err, e, path);
        return pb_fail(a->err, PB_ECORRUPT, "catalog %s: %s: hash chunk %llu missing or of "
                       "the wrong size", a->c->dir, path, (unsigned long long)ci);
    }
    for (uint32_t i = 0; i < n; i++)
        a->old[i] = pb_get_u64((const uint8_t *)v + (size_t)i * 8);
    a->st.chunks_read++;
    return 0;
}

/* Pages [from, to) of chunk ci were not shipped: take them from the head. */
static int fill_unshipped(apply_ctx *a, const mf_file *f, uint32_t old_np, uint64_t ci,
                          bool *loaded, uint64_t from, uint64_t to)
{
    if (from >= to)
        return 0;
    uint64_t lo = ci * MF_CHUNK_PAGES;
    if (to > old_np) {
        uint64_t page = from > old_np ? from : old_np;
        if (a->full)
            return pb_fail(a->err, PB_ECORRUPT, "applying full backup %s: %s page %llu was "
                           "not shipped", a->id, f->path, (unsigned long long)page);
        return pb_fail(a->err, PB_ECORRUPT, "applying backup %s: %s page %llu was not shipped "
                       "and the head has only %u pages: the chain is inconsistent", a->id,
                       f->path, (unsigned long long)page, old_np);
    }
    if (!*loaded) {
        int rc = load_old_chunk(a, f->path, ci, mfc_chunk_len(old_np, ci));
        if (rc)
            return rc;
        *loaded = true;
    }
    memcpy(a->cur + (from - lo), a->old + (from - lo), (to - from) * 8);
    return 0;
}

/* Build chunk ci of f in a->cur: shipped pages from the runs (refs sorted by first
 * page; *cursor is the first run not finished before this chunk), the others from
 * the head. *changed is false when the head's chunk can stay as it is. */
static int build_chunk(apply_ctx *a, const mf_file *f, const mf_run_ref *refs,
                       uint32_t *cursor, uint32_t old_np, uint64_t ci, bool *changed)
{
    uint64_t lo = ci * MF_CHUNK_PAGES, hi = lo + mfc_chunk_len(f->npages, ci);
    uint32_t old_len = mfc_chunk_len(old_np, ci), k = *cursor;
    *changed = false;
    if ((k == f->nruns || refs[k].first >= hi) && hi - lo == old_len)
        return 0; /* nothing shipped here and same length: untouched, not even read */
    bool loaded = false;
    uint64_t pos = lo;
    int rc = 0;
    for (; k < f->nruns && refs[k].first < hi; k++) {
        uint64_t first = refs[k].first, end = first + refs[k].count;
        uint64_t s = first > lo ? first : lo, e = end < hi ? end : hi;
        if ((rc = fill_unshipped(a, f, old_np, ci, &loaded, pos, s)))
            return rc;
        memcpy(a->cur + (s - lo), f->page_hashes + refs[k].hash_at + (s - first), (e - s) * 8);
        pos = e;
        if (end > hi)
            break; /* the run goes on in the next chunk */
    }
    *cursor = k;
    if ((rc = fill_unshipped(a, f, old_np, ci, &loaded, pos, hi)))
        return rc;
    *changed = !(loaded && old_len == hi - lo && memcmp(a->cur, a->old, old_len * 8) == 0);
    return 0;
}

static void put_chunk(apply_ctx *a, const char *path, uint64_t ci, uint32_t n)
{
    char key[KEY_MAX];
    for (uint32_t i = 0; i < n; i++)
        pb_put_u64(a->val + (size_t)i * 8, a->cur[i]);
    rocksdb_writebatch_put(a->batch, key, mfc_key_h(key, path, strlen(path), (uint32_t)ci),
                           (const char *)a->val, (size_t)n * 8);
    a->st.chunks_put++;
}

/* Delete the chunks of path from chunk `from` on. */
static void delete_chunks_from(apply_ctx *a, const char *path, size_t plen, uint64_t from)
{
    char start[KEY_MAX], end[KEY_MAX];
    size_t slen = mfc_key_h(start, path, plen, (uint32_t)from);
    rocksdb_writebatch_delete_range(a->batch, start, slen, end, mfc_key_h_end(end, path, plen));
}

static int apply_rel(apply_ctx *a, const mf_file *f, uint32_t old_np)
{
    mf_run_ref *refs = NULL;
    int rc = mf_runs_sorted(f, &refs, PB_EINVAL, "catalog apply", a->err);
    uint32_t cursor = 0;
    for (uint64_t ci = 0; !rc && ci < mfc_nchunks(f->npages); ci++) {
        bool changed;
        rc = build_chunk(a, f, refs, &cursor, old_np, ci, &changed);
        if (!rc && changed)
            put_chunk(a, f->path, ci, mfc_chunk_len(f->npages, ci));
        else if (!rc)
            a->st.chunks_kept++;
    }
    if (!rc && mfc_nchunks(old_np) > mfc_nchunks(f->npages))
        delete_chunks_from(a, f->path, strlen(f->path), mfc_nchunks(f->npages));
    free(refs);
    return rc;
}

/* f is in the new head; old is its raw "F" value in the old head (NULL if none). */
static int apply_file(apply_ctx *a, const mf_file *f, const char *old, size_t old_len)
{
    char key[KEY_MAX];
    uint8_t v[F_VALUE_LEN];
    f_value ov = {MF_DIR, 0, 0, {0}};
    int rc = mf_check_file(f, PB_EINVAL, "catalog apply", a->err);
    if (rc)
        return rc;
    if (old && mfc_f_decode(old, old_len, &ov))
        return pb_fail(a->err, PB_ECORRUPT, "catalog %s: %s: bad file entry (%zu bytes)",
                       a->c->dir, f->path, old_len);
    mfc_f_encode(v, f);
    if (!old || old_len != F_VALUE_LEN || memcmp(old, v, F_VALUE_LEN) != 0) {
        rocksdb_writebatch_put(a->batch, key, mfc_key_f(key, f->path), (const char *)v,
                               F_VALUE_LEN);
        a->st.files_put++;
    }
    uint32_t old_np = old && ov.kind == MF_REL ? ov.npages : 0;
    if (f->kind == MF_REL)
        return apply_rel(a, f, old_np);
    if (old_np)
        delete_chunks_from(a, f->path, strlen(f->path), 0);
    return 0;
}

static void drop_path(apply_ctx *a, const char *path, size_t plen)
{
    char key[KEY_MAX];
    key[0] = 'F';
    memcpy(key + 1, path, plen);
    rocksdb_writebatch_delete(a->batch, key, plen + 1);
    delete_chunks_from(a, path, plen, 0);
    a->st.files_deleted++;
}

/* Write the batch once it holds batch_limit bytes (called between files, so one file's
 * chunks, at most 32 MiB, may pass the limit): memory stays bounded whatever the size
 * of the head. The first batch holds the removal of "S" (see the top of the file). No
 * batch is synced (catalog.c, mf_catalog_open, says why). */
static int flush_if_full(apply_ctx *a)
{
    size_t size = 0;
    rocksdb_writebatch_data(a->batch, &size);
    if (size < a->c->batch_limit)
        return 0;
    char *e = NULL;
    rocksdb_write(a->c->db, a->c->wopts_nosync, a->batch, &e);
    if (e)
        return mfc_db_fail(a->c, a->err, e, "writing a batch of the new head");
    rocksdb_writebatch_clear(a->batch);
    a->st.batches++;
    if (size > a->st.batch_peak)
        a->st.batch_peak = size;
    return 0;
}

/* memcmp order of a key's path against a C string: the same order as strcmp. */
static int cmp_key_path(const char *kp, size_t klen, const char *path)
{
    size_t plen = strlen(path);
    int r = memcmp(kp, path, klen < plen ? klen : plen);
    if (r)
        return r;
    return klen < plen ? -1 : klen > plen;
}

/* The new head's records in path order: an array (a manifest in memory) or a stream
 * holding one record at a time, whose order is checked here since the merge below
 * relies on it. */
typedef struct apply_in {
    const mf_file **files;
    size_t n, i;
    mf_stream *s;
    mf_file cur;  /* the stream's record last returned */
    char *prev;   /* its path, for the order check */
} apply_in;

/* *out: the next record, NULL at the end. */
static int in_next(apply_in *in, const mf_file **out, pb_error *err)
{
    *out = NULL;
    if (!in->s) {
        if (in->i < in->n)
            *out = in->files[in->i++];
        return 0;
    }
    free(in->prev);
    in->prev = in->cur.path;
    in->cur.path = NULL;
    mf_file_clear(&in->cur);
    int rc = mf_stream_next(in->s, &in->cur, err);
    if (rc <= 0)
        return rc;
    if (in->prev && strcmp(in->prev, in->cur.path) >= 0)
        return pb_fail(err, PB_ECORRUPT, "manifest of %s: file %s after %s (not in path "
                       "order)", mf_stream_header(in->s)->id, in->cur.path, in->prev);
    *out = &in->cur;
    return 0;
}

static void in_free(apply_in *in)
{
    mf_file_clear(&in->cur);
    free(in->prev);
}

/* Merge the old head's "F" keys (in key order) with the new head's files: one pass. */
static int apply_incremental(apply_ctx *a, const rocksdb_readoptions_t *ro, apply_in *in)
{
    rocksdb_iterator_t *it = rocksdb_create_iterator(a->c->db, ro);
    rocksdb_iter_seek(it, "F", 1);
    const mf_file *f = NULL;
    int rc = in_next(in, &f, a->err);
    while (rc == 0) {
        size_t klen = 0, vlen = 0;
        const char *k = rocksdb_iter_valid(it) ? rocksdb_iter_key(it, &klen) : NULL;
        if (k && (klen < 2 || k[0] != 'F'))
            k = NULL; /* past the "F" keys */
        if (k && klen - 1 >= MF_PATH_MAX) {
            rc = pb_fail(a->err, PB_ECORRUPT, "catalog %s: file key of %zu bytes", a->c->dir,
                         klen);
            break;
        }
        if (!k && !f)
            break;
        int cmp = !k ? 1 : !f ? -1 : cmp_key_path(k + 1, klen - 1, f->path);
        if (cmp < 0) {
            drop_path(a, k + 1, klen - 1);
        } else {
            const char *v = cmp == 0 ? rocksdb_iter_value(it, &vlen) : NULL;
            if ((rc = apply_file(a, f, v, vlen)) == 0)
                rc = in_next(in, &f, a->err);
        }
        if (rc)
            break;
        if (cmp <= 0)
            rocksdb_iter_next(it);
        rc = flush_if_full(a);
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    if (e && !rc)
        rc = mfc_db_fail(a->c, a->err, e, "scanning file entries");
    else if (e)
        rocksdb_free(e);
    rocksdb_iter_destroy(it);
    return rc;
}

/* A full (or synthetic full) replaces the head: clear everything in the same batch;
 * the puts that follow have later sequence numbers than the range deletion. */
static int apply_full(apply_ctx *a, apply_in *in)
{
    mfc_batch_clear_all(a->batch);
    const mf_file *f = NULL;
    int rc = in_next(in, &f, a->err);
    while (rc == 0 && f) {
        rc = apply_file(a, f, NULL, 0);
        if (rc == 0)
            rc = flush_if_full(a);
        if (rc == 0)
            rc = in_next(in, &f, a->err);
    }
    return rc;
}

static int check_parent(apply_ctx *a, const rocksdb_readoptions_t *ro, const mf_backup *h)
{
    char head[MF_ID_LEN];
    int rc = mfc_read_head(a->c, ro, head, a->err);
    if (rc == PB_ENOENT)
        return pb_fail(a->err, PB_ESTATE, "catalog %s is empty: incremental %s needs its "
                       "parent %s applied first", a->c->dir, h->id, h->parent);
    if (rc)
        return rc;
    if (strcmp(head, h->parent) != 0)
        return pb_fail(a->err, PB_ESTATE, "catalog %s: head is %s but backup %s has parent %s",
                       a->c->dir, head, h->id, h->parent);
    return 0;
}

static int apply_body(apply_ctx *a, const rocksdb_readoptions_t *ro, const mf_backup *h,
                      apply_in *in)
{
    int rc = 0;
    if (a->full)
        rc = apply_full(a, in);
    else if (!(rc = check_parent(a, ro, h))) {
        rocksdb_writebatch_delete(a->batch, "S", 1); /* no head until the last batch */
        rc = apply_incremental(a, ro, in);
    }
    if (!rc)
        rocksdb_writebatch_put(a->batch, "S", 1, h->id, strlen(h->id));
    return rc;
}

static int apply_from(mf_catalog *c, const mf_backup *h, apply_in *in, pb_error *err)
{
    if (strnlen(h->id, MF_ID_LEN) == MF_ID_LEN || strnlen(h->parent, MF_ID_LEN) == MF_ID_LEN ||
        (h->type != 'F' && h->type != 'I' && h->type != 'S'))
        return pb_fail(err, PB_EINVAL, "catalog %s: apply: bad backup id or type", c->dir);
    if (mf_catalog_damaged(c)) /* removed at close; the next backup rebuilds it */
        return pb_fail(err, PB_ECORRUPT, "catalog %s was found damaged: %s is not applied",
                       c->dir, h->id);
    apply_ctx a = {.c = c, .id = h->id, .full = h->type != 'I', .err = err};
    a.cur = malloc(MF_CHUNK_PAGES * 8);
    a.old = malloc(MF_CHUNK_PAGES * 8);
    a.val = malloc(MF_CHUNK_PAGES * 8);
    a.batch = rocksdb_writebatch_create();
    const rocksdb_snapshot_t *snap = rocksdb_create_snapshot(c->db);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_snapshot(ro, snap);
    int rc = 0;
    if (!a.cur || !a.old || !a.val) {
        rc = pb_fail(err, PB_ENOMEM, "catalog %s: applying %s", c->dir, h->id);
        goto out;
    }
    if (!a.full)
        a.hit = rocksdb_create_iterator(c->db, ro);
    if ((rc = apply_body(&a, ro, h, in)))
        goto out;
    char *e = NULL;
    size_t size = 0;
    rocksdb_writebatch_data(a.batch, &size);
    rocksdb_write(c->db, c->wopts, a.batch, &e);
    if (e) {
        rc = mfc_db_fail(c, err, e, "writing the new head");
        goto out;
    }
    a.st.batches++;
    if (size > a.st.batch_peak)
        a.st.batch_peak = size;
    c->last = a.st;
out:
    if (a.hit)
        rocksdb_iter_destroy(a.hit);
    rocksdb_readoptions_destroy(ro);
    rocksdb_release_snapshot(c->db, snap);
    rocksdb_writebatch_destroy(a.batch);
    free(a.cur);
    free(a.old);
    free(a.val);
    return rc;
}

int mf_catalog_apply(mf_catalog *c, const mf_manifest *m, pb_error *err)
{
    apply_in in = {.n = mf_count(m)};
    const mf_file **owned = NULL;
    int rc = mf_sorted_view(m, &in.files, &owned, "catalog apply", err);
    if (rc == 0)
        rc = apply_from(c, mf_header_c(m), &in, err);
    free(owned);
    return rc;
}

int mf_catalog_apply_stream(mf_catalog *c, mf_stream *s, pb_error *err)
{
    apply_in in = {.s = s};
    int rc = apply_from(c, mf_stream_header(s), &in, err);
    in_free(&in);
    return rc;
}
