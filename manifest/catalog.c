/*
 * manifest/catalog.c — the chain head's hashes in RocksDB (the only file that
 * includes <rocksdb/c.h>). The catalog is a cache: everything in it can be rebuilt
 * from the repository's manifests by mf_catalog_reset + mf_catalog_apply in chain
 * order.
 *
 * Key schema (docs/MANIFEST.md):
 *   "S"                                  -> head backup id (no NUL)
 *   "F" path                             -> 48 bytes: u32 kind, u32 npages, u64 hash,
 *                                           char stored_in[32]  (little-endian)
 *   "H" path '\0' u32 chunk (big-endian) -> packed LE u64 hashes of pages
 *                                           [chunk * 8192, min(+8192, npages))
 * Paths never contain NUL, so "H" path '\0' is a prefix owned by exactly one path
 * and ["H" path '\0', "H" path '\1') is exactly its chunks. Big-endian chunk numbers
 * sort numerically, so a file's chunks are adjacent and read with one seek.
 */
#include "manifest/manifest_internal.h"

#include <rocksdb/c.h>
#include <stdlib.h>
#include <string.h>

#define F_VALUE_LEN (4 + 4 + 8 + MF_ID_LEN)
#define KEY_MAX (1 + MF_PATH_MAX + 1 + 4)

struct mf_catalog {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_readoptions_t *ropts;
    rocksdb_writeoptions_t *wopts;
    char *dir;
    mf_apply_stats last;
};

typedef struct f_value {
    mf_kind kind;
    uint32_t npages;
    uint64_t hash;
    char stored_in[MF_ID_LEN];
} f_value;

/* ---- keys and values ---- */

static size_t key_f(char *k, const char *path)
{
    size_t n = strlen(path);
    k[0] = 'F';
    memcpy(k + 1, path, n);
    return n + 1;
}

/* The key of one chunk; key_h_end is the (exclusive) end of all of path's chunks. */
static size_t key_h(char *k, const char *path, size_t plen, uint32_t chunk)
{
    k[0] = 'H';
    memcpy(k + 1, path, plen);
    k[1 + plen] = '\0';
    for (int i = 0; i < 4; i++)
        k[2 + plen + i] = (char)(uint8_t)(chunk >> (24 - 8 * i));
    return plen + 6;
}

static size_t key_h_end(char *k, const char *path, size_t plen)
{
    k[0] = 'H';
    memcpy(k + 1, path, plen);
    k[1 + plen] = '\1';
    return plen + 2;
}

static uint64_t nchunks(uint32_t npages)
{
    return ((uint64_t)npages + MF_CHUNK_PAGES - 1) / MF_CHUNK_PAGES;
}

static uint32_t chunk_len(uint32_t npages, uint64_t ci)
{
    uint64_t lo = ci * MF_CHUNK_PAGES;
    if (lo >= npages)
        return 0;
    uint64_t n = npages - lo;
    return n < MF_CHUNK_PAGES ? (uint32_t)n : MF_CHUNK_PAGES;
}

static void f_encode(uint8_t v[F_VALUE_LEN], const mf_file *f)
{
    memset(v, 0, F_VALUE_LEN);
    pb_put_u32(v, (uint32_t)f->kind);
    pb_put_u32(v + 4, f->kind == MF_REL ? f->npages : 0);
    if (f->kind == MF_FILE) {
        pb_put_u64(v + 8, f->hash);
        memcpy(v + 16, f->stored_in, strnlen(f->stored_in, MF_ID_LEN));
    }
}

static int f_decode(const char *v, size_t len, f_value *out)
{
    const uint8_t *p = (const uint8_t *)v;
    if (len != F_VALUE_LEN || pb_get_u32(p) > MF_LINK || p[16 + MF_ID_LEN - 1] != '\0' ||
        pb_get_u32(p + 4) > MF_REL_MAX_PAGES) /* npages sizes an allocation in lookup */
        return PB_ECORRUPT;
    out->kind = (mf_kind)pb_get_u32(p);
    out->npages = pb_get_u32(p + 4);
    out->hash = pb_get_u64(p + 8);
    memcpy(out->stored_in, p + 16, MF_ID_LEN);
    return 0;
}

/* Consume a RocksDB error string: Corruption maps to PB_ECORRUPT, the rest
 * (I/O, lock held by another process, ...) to PB_EIO. */
static int db_fail(pb_error *err, char *dberr, const char *dir, const char *op)
{
    int code = strncmp(dberr, "Corruption", 10) == 0 ? PB_ECORRUPT : PB_EIO;
    pb_fail(err, code, "catalog %s: %s: %s", dir, op, dberr);
    rocksdb_free(dberr);
    return code;
}

/* ---- open, close, head, reset ---- */

static void set_table_options(rocksdb_options_t *opts)
{
    rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
    /* Bloom filter: the engine asks for every file of PGDATA, new ones included. */
    rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom(10));
    rocksdb_options_set_block_based_table_factory(opts, t); /* copies */
    rocksdb_block_based_options_destroy(t);
}

/* Read every key and value once with checksums verified: RocksDB checks a block only
 * when it is read, so a damaged catalog would otherwise fail (or worse, answer) in the
 * middle of a backup. Sequential, O(catalog): 8 bytes per page of the chain head. */
static int verify_all(mf_catalog *c, pb_error *err)
{
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_verify_checksums(ro, 1);
    rocksdb_readoptions_set_fill_cache(ro, 0);
    rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, ro);
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it))
        ;
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return e ? db_fail(err, e, c->dir, "verifying") : 0;
}

static int open_db(mf_catalog *c, pb_error *err)
{
    char *e = NULL;
    c->db = rocksdb_open(c->opts, c->dir, &e);
    if (e)
        return db_fail(err, e, c->dir, "open");
    return verify_all(c, err);
}

/* The catalog is a cache of the repository (DESIGN rule 7): a damaged one is dropped
 * and starts empty, and the caller's head check (chain_sync_catalog) rebuilds it from
 * the repository's manifests. Only corruption is handled so: an I/O error or a lock
 * held by another process is returned. */
static int reopen_empty(mf_catalog *c, pb_error *err)
{
    pb_warn("%s: the catalog is damaged and is rebuilt from the repository", err->msg);
    if (c->db)
        rocksdb_close(c->db);
    c->db = NULL;
    char *e = NULL;
    rocksdb_destroy_db(c->opts, c->dir, &e);
    if (e)
        return db_fail(err, e, c->dir, "removing the damaged catalog");
    return open_db(c, err);
}

int mf_catalog_open(mf_catalog **out, const char *dir, pb_error *err)
{
    *out = NULL;
    pb_error local = PB_ERROR_INIT;
    if (!err)
        err = &local;
    mf_catalog *c = calloc(1, sizeof(*c));
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        return pb_fail(err, PB_ENOMEM, "opening catalog %s", dir);
    }
    c->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(c->opts, 1);
    rocksdb_options_set_paranoid_checks(c->opts, 1);
    /* Values are hashes: nothing for a compressor to find. */
    rocksdb_options_set_compression(c->opts, rocksdb_no_compression);
    set_table_options(c->opts);
    c->ropts = rocksdb_readoptions_create();
    rocksdb_readoptions_set_verify_checksums(c->ropts, 1);
    c->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(c->wopts, 1); /* one fsync per apply */
    int rc = open_db(c, err);
    if (rc == PB_ECORRUPT)
        rc = reopen_empty(c, err);
    if (rc) {
        mf_catalog_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void mf_catalog_close(mf_catalog *c)
{
    if (!c)
        return;
    if (c->db)
        rocksdb_close(c->db);
    if (c->opts)
        rocksdb_options_destroy(c->opts);
    if (c->ropts)
        rocksdb_readoptions_destroy(c->ropts);
    if (c->wopts)
        rocksdb_writeoptions_destroy(c->wopts);
    free(c->dir);
    free(c);
}

static int read_head(mf_catalog *c, const rocksdb_readoptions_t *ro, char out[MF_ID_LEN],
                     pb_error *err)
{
    char *e = NULL;
    size_t len = 0;
    char *v = rocksdb_get(c->db, ro, "S", 1, &len, &e);
    if (e)
        return db_fail(err, e, c->dir, "reading the head id");
    if (!v)
        return pb_fail(err, PB_ENOENT, "catalog %s is empty (no head backup)", c->dir);
    int rc = 0;
    if (len >= MF_ID_LEN || memchr(v, '\0', len))
        rc = pb_fail(err, PB_ECORRUPT, "catalog %s: head id of %zu bytes", c->dir, len);
    else {
        memset(out, 0, MF_ID_LEN);
        memcpy(out, v, len);
    }
    rocksdb_free(v);
    return rc;
}

int mf_catalog_head(mf_catalog *c, char out[MF_ID_LEN], pb_error *err)
{
    return read_head(c, c->ropts, out, err);
}

/* Every key starts with 'F', 'H' or 'S': ["", "\xff") holds them all. */
static void batch_clear_all(rocksdb_writebatch_t *b)
{
    rocksdb_writebatch_delete_range(b, "", 0, "\xff", 1);
}

int mf_catalog_reset(mf_catalog *c, pb_error *err)
{
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();
    batch_clear_all(b);
    char *e = NULL;
    rocksdb_write(c->db, c->wopts, b, &e);
    rocksdb_writebatch_destroy(b);
    return e ? db_fail(err, e, c->dir, "reset") : 0;
}

/* ---- lookup ---- */

/* Read the npages hashes of path: its chunks are consecutive keys after one seek. */
static int read_chunks(mf_catalog *c, rocksdb_iterator_t *it, const char *path,
                       uint32_t npages, uint64_t *out, pb_error *err)
{
    char key[KEY_MAX];
    size_t plen = strlen(path);
    rocksdb_iter_seek(it, key, key_h(key, path, plen, 0));
    for (uint64_t ci = 0; ci < nchunks(npages); ci++, rocksdb_iter_next(it)) {
        size_t klen = key_h(key, path, plen, (uint32_t)ci), got_klen, vlen;
        uint32_t n = chunk_len(npages, ci);
        const char *k = rocksdb_iter_valid(it) ? rocksdb_iter_key(it, &got_klen) : NULL;
        const char *v = k ? rocksdb_iter_value(it, &vlen) : NULL;
        if (!k || got_klen != klen || memcmp(k, key, klen) != 0 || vlen != (size_t)n * 8) {
            char *e = NULL;
            rocksdb_iter_get_error(it, &e);
            if (e)
                return db_fail(err, e, c->dir, path);
            return pb_fail(err, PB_ECORRUPT, "catalog %s: %s: hash chunk %llu of %u pages "
                           "missing or of the wrong size", c->dir, path,
                           (unsigned long long)ci, npages);
        }
        const uint8_t *p = (const uint8_t *)v;
        for (uint32_t i = 0; i < n; i++)
            out[ci * MF_CHUNK_PAGES + i] = pb_get_u64(p + (size_t)i * 8);
    }
    return 0;
}

static int lookup_in(mf_catalog *c, const rocksdb_readoptions_t *ro, const char *path,
                     mf_head_entry *out, pb_error *err)
{
    char key[KEY_MAX], *e = NULL;
    size_t len = 0;
    char *v = rocksdb_get(c->db, ro, key, key_f(key, path), &len, &e);
    if (e)
        return db_fail(err, e, c->dir, path);
    if (!v)
        return pb_fail(err, PB_ENOENT, "catalog %s: %s is not in the head", c->dir, path);
    f_value fv;
    int rc = f_decode(v, len, &fv);
    rocksdb_free(v);
    if (rc)
        return pb_fail(err, rc, "catalog %s: %s: bad file entry (%zu bytes)", c->dir, path, len);
    out->kind = fv.kind;
    out->npages = fv.npages;
    out->hash = fv.hash;
    memcpy(out->stored_in, fv.stored_in, MF_ID_LEN);
    if (fv.kind != MF_REL || fv.npages == 0)
        return 0;
    out->hashes = malloc((size_t)fv.npages * 8);
    if (!out->hashes)
        return pb_fail(err, PB_ENOMEM, "catalog %s: %s: %u page hashes", c->dir, path,
                       fv.npages);
    rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, ro);
    rc = read_chunks(c, it, path, fv.npages, out->hashes, err);
    rocksdb_iter_destroy(it);
    return rc;
}

int mf_catalog_lookup(mf_catalog *c, const char *path, mf_head_entry *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    if (!path || !*path || strlen(path) >= MF_PATH_MAX)
        return pb_fail(err, PB_EINVAL, "catalog %s: lookup of an empty or too long path", c->dir);
    /* One snapshot so the file entry and its chunks come from the same apply. */
    const rocksdb_snapshot_t *snap = rocksdb_create_snapshot(c->db);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_snapshot(ro, snap);
    int rc = lookup_in(c, ro, path, out, err);
    rocksdb_readoptions_destroy(ro);
    rocksdb_release_snapshot(c->db, snap);
    if (rc) {
        free(out->hashes);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

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
    size_t klen = key_h(key, path, strlen(path), (uint32_t)ci), got_klen, vlen;
    rocksdb_iter_seek(a->hit, key, klen);
    const char *k = rocksdb_iter_valid(a->hit) ? rocksdb_iter_key(a->hit, &got_klen) : NULL;
    const char *v = k ? rocksdb_iter_value(a->hit, &vlen) : NULL;
    if (!k || got_klen != klen || memcmp(k, key, klen) != 0 || vlen != (size_t)n * 8) {
        char *e = NULL;
        rocksdb_iter_get_error(a->hit, &e);
        if (e)
            return db_fail(a->err, e, a->c->dir, path);
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
        int rc = load_old_chunk(a, f->path, ci, chunk_len(old_np, ci));
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
    uint64_t lo = ci * MF_CHUNK_PAGES, hi = lo + chunk_len(f->npages, ci);
    uint32_t old_len = chunk_len(old_np, ci), k = *cursor;
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
    rocksdb_writebatch_put(a->batch, key, key_h(key, path, strlen(path), (uint32_t)ci),
                           (const char *)a->val, (size_t)n * 8);
    a->st.chunks_put++;
}

/* Delete the chunks of path from chunk `from` on. */
static void delete_chunks_from(apply_ctx *a, const char *path, size_t plen, uint64_t from)
{
    char start[KEY_MAX], end[KEY_MAX];
    size_t slen = key_h(start, path, plen, (uint32_t)from);
    rocksdb_writebatch_delete_range(a->batch, start, slen, end, key_h_end(end, path, plen));
}

static int apply_rel(apply_ctx *a, const mf_file *f, uint32_t old_np)
{
    mf_run_ref *refs = NULL;
    int rc = mf_runs_sorted(f, &refs, PB_EINVAL, "catalog apply", a->err);
    uint32_t cursor = 0;
    for (uint64_t ci = 0; !rc && ci < nchunks(f->npages); ci++) {
        bool changed;
        rc = build_chunk(a, f, refs, &cursor, old_np, ci, &changed);
        if (!rc && changed)
            put_chunk(a, f->path, ci, chunk_len(f->npages, ci));
        else if (!rc)
            a->st.chunks_kept++;
    }
    if (!rc && nchunks(old_np) > nchunks(f->npages))
        delete_chunks_from(a, f->path, strlen(f->path), nchunks(f->npages));
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
    if (old && f_decode(old, old_len, &ov))
        return pb_fail(a->err, PB_ECORRUPT, "catalog %s: %s: bad file entry (%zu bytes)",
                       a->c->dir, f->path, old_len);
    f_encode(v, f);
    if (!old || old_len != F_VALUE_LEN || memcmp(old, v, F_VALUE_LEN) != 0) {
        rocksdb_writebatch_put(a->batch, key, key_f(key, f->path), (const char *)v,
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

/* memcmp order of a key's path against a C string: the same order as strcmp. */
static int cmp_key_path(const char *kp, size_t klen, const char *path)
{
    size_t plen = strlen(path);
    int r = memcmp(kp, path, klen < plen ? klen : plen);
    if (r)
        return r;
    return klen < plen ? -1 : klen > plen;
}

/* Merge the old head's "F" keys (in key order) with m's sorted files: one pass. */
static int apply_incremental(apply_ctx *a, const rocksdb_readoptions_t *ro,
                             const mf_file **files, size_t n)
{
    rocksdb_iterator_t *it = rocksdb_create_iterator(a->c->db, ro);
    rocksdb_iter_seek(it, "F", 1);
    size_t i = 0;
    int rc = 0;
    for (;;) {
        size_t klen = 0, vlen = 0;
        const char *k = rocksdb_iter_valid(it) ? rocksdb_iter_key(it, &klen) : NULL;
        if (k && (klen < 2 || k[0] != 'F'))
            k = NULL; /* past the "F" keys */
        if (k && klen - 1 >= MF_PATH_MAX) {
            rc = pb_fail(a->err, PB_ECORRUPT, "catalog %s: file key of %zu bytes", a->c->dir,
                         klen);
            break;
        }
        if (!k && i == n)
            break;
        int cmp = !k ? 1 : i == n ? -1 : cmp_key_path(k + 1, klen - 1, files[i]->path);
        if (cmp < 0) {
            drop_path(a, k + 1, klen - 1);
        } else if (cmp > 0) {
            rc = apply_file(a, files[i++], NULL, 0);
        } else {
            const char *v = rocksdb_iter_value(it, &vlen);
            rc = apply_file(a, files[i++], v, vlen);
        }
        if (rc)
            break;
        if (cmp <= 0)
            rocksdb_iter_next(it);
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    if (e && !rc)
        rc = db_fail(a->err, e, a->c->dir, "scanning file entries");
    else if (e)
        rocksdb_free(e);
    rocksdb_iter_destroy(it);
    return rc;
}

/* A full (or synthetic full) replaces the head: clear everything in the same batch;
 * the puts that follow have later sequence numbers than the range deletion. */
static int apply_full(apply_ctx *a, const mf_file **files, size_t n)
{
    batch_clear_all(a->batch);
    for (size_t i = 0; i < n; i++) {
        int rc = apply_file(a, files[i], NULL, 0);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_parent(apply_ctx *a, const rocksdb_readoptions_t *ro, const mf_backup *h)
{
    char head[MF_ID_LEN];
    int rc = read_head(a->c, ro, head, a->err);
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

static int apply_body(apply_ctx *a, const rocksdb_readoptions_t *ro, const mf_manifest *m)
{
    const mf_backup *h = mf_header_c(m);
    const mf_file **files = NULL, **owned = NULL;
    int rc = mf_sorted_view(m, &files, &owned, "catalog apply", a->err);
    if (rc)
        return rc;
    if (a->full)
        rc = apply_full(a, files, mf_count(m));
    else if (!(rc = check_parent(a, ro, h)))
        rc = apply_incremental(a, ro, files, mf_count(m));
    free(owned);
    if (!rc)
        rocksdb_writebatch_put(a->batch, "S", 1, h->id, strlen(h->id));
    return rc;
}

int mf_catalog_apply(mf_catalog *c, const mf_manifest *m, pb_error *err)
{
    const mf_backup *h = mf_header_c(m);
    if (strnlen(h->id, MF_ID_LEN) == MF_ID_LEN || strnlen(h->parent, MF_ID_LEN) == MF_ID_LEN ||
        (h->type != 'F' && h->type != 'I' && h->type != 'S'))
        return pb_fail(err, PB_EINVAL, "catalog %s: apply: bad backup id or type", c->dir);
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
    if ((rc = apply_body(&a, ro, m)))
        goto out;
    char *e = NULL;
    rocksdb_write(c->db, c->wopts, a.batch, &e);
    if (e) {
        rc = db_fail(err, e, c->dir, "writing the new head");
        goto out;
    }
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

/* ---- introspection ---- */

void mf_catalog_last_stats(const mf_catalog *c, mf_apply_stats *out)
{
    *out = c->last;
}

int mf_catalog_count_keys(mf_catalog *c, char prefix, uint64_t *out, pb_error *err)
{
    *out = 0;
    rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
    for (rocksdb_iter_seek(it, &prefix, 1); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t klen;
        const char *k = rocksdb_iter_key(it, &klen);
        if (klen == 0 || k[0] != prefix)
            break;
        (*out)++;
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    rocksdb_iter_destroy(it);
    return e ? db_fail(err, e, c->dir, "counting keys") : 0;
}
