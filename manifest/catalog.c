/*
 * manifest/catalog.c — the chain head's hashes in RocksDB: keys, open, head, reset,
 * lookup (catalog_apply.c applies a manifest; with catalog_internal.h, the only files
 * that include <rocksdb/c.h>). The catalog is a cache: everything in it can be rebuilt
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
#include "manifest/catalog_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* ---- keys and values ---- */

size_t mfc_key_f(char *k, const char *path)
{
    size_t n = strlen(path);
    k[0] = 'F';
    memcpy(k + 1, path, n);
    return n + 1;
}

/* The key of one chunk; mfc_key_h_end is the (exclusive) end of all of path's chunks. */
size_t mfc_key_h(char *k, const char *path, size_t plen, uint32_t chunk)
{
    k[0] = 'H';
    memcpy(k + 1, path, plen);
    k[1 + plen] = '\0';
    for (int i = 0; i < 4; i++)
        k[2 + plen + i] = (char)(uint8_t)(chunk >> (24 - 8 * i));
    return plen + 6;
}

size_t mfc_key_h_end(char *k, const char *path, size_t plen)
{
    k[0] = 'H';
    memcpy(k + 1, path, plen);
    k[1 + plen] = '\1';
    return plen + 2;
}

uint64_t mfc_nchunks(uint32_t npages)
{
    return ((uint64_t)npages + MF_CHUNK_PAGES - 1) / MF_CHUNK_PAGES;
}

uint32_t mfc_chunk_len(uint32_t npages, uint64_t ci)
{
    uint64_t lo = ci * MF_CHUNK_PAGES;
    if (lo >= npages)
        return 0;
    uint64_t n = npages - lo;
    return n < MF_CHUNK_PAGES ? (uint32_t)n : MF_CHUNK_PAGES;
}

void mfc_f_encode(uint8_t v[F_VALUE_LEN], const mf_file *f)
{
    memset(v, 0, F_VALUE_LEN);
    pb_put_u32(v, (uint32_t)f->kind);
    pb_put_u32(v + 4, f->kind == MF_REL ? f->npages : 0);
    if (f->kind == MF_FILE) {
        pb_put_u64(v + 8, f->hash);
        memcpy(v + 16, f->stored_in, strnlen(f->stored_in, MF_ID_LEN));
    }
}

int mfc_f_decode(const char *v, size_t len, f_value *out)
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

/* Consume a RocksDB error string: Corruption maps to PB_ECORRUPT and marks the catalog
 * damaged, the rest (I/O, lock held by another process, ...) to PB_EIO. */
int mfc_db_fail(mf_catalog *c, pb_error *err, char *dberr, const char *op)
{
    int code = strncmp(dberr, "Corruption", 10) == 0 ? PB_ECORRUPT : PB_EIO;
    pb_fail(err, code, "catalog %s: %s: %s", c->dir, op, dberr);
    rocksdb_free(dberr);
    if (code == PB_ECORRUPT)
        atomic_store(&c->damaged, true);
    return code;
}

/* ---- open, close, head, reset ---- */

/* Bounded memory (catalog_internal.h): index and filter blocks go through the one cache,
 * those of level 0 pinned there (they are read on every lookup). */
static void set_table_options(rocksdb_options_t *opts, rocksdb_cache_t *cache)
{
    rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
    /* Bloom filter: the engine asks for every file of PGDATA, new ones included. */
    rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom(10));
    rocksdb_block_based_options_set_block_cache(t, cache);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(t, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(t, 1);
    rocksdb_options_set_block_based_table_factory(opts, t); /* copies */
    rocksdb_block_based_options_destroy(t);
}

/* RocksDB's own log (LOG in the catalog directory): warnings and errors only, and
 * MF_CATALOG_INFO_LOGS old ones kept. By default each open wrote some 25 KiB of
 * information into it and kept up to 1000 old logs. */
static void set_log_options(rocksdb_options_t *opts)
{
    rocksdb_options_set_info_log_level(opts, 2); /* rocksdb::InfoLogLevel::WARN_LEVEL */
    rocksdb_options_set_keep_log_file_num(opts, MF_CATALOG_INFO_LOGS);
}

static void set_memory_options(rocksdb_options_t *opts)
{
    rocksdb_options_set_write_buffer_size(opts, MF_CATALOG_MEMTABLE_BYTES);
    rocksdb_options_set_max_write_buffer_number(opts, MF_CATALOG_MEMTABLES);
    size_t total = (size_t)MF_CATALOG_MEMTABLE_BYTES * MF_CATALOG_MEMTABLES;
    rocksdb_options_set_db_write_buffer_size(opts, total);
    /* Each open file's write buffer (the WAL's, a flush's table) grows to 1 MiB by default;
     * batches are synced one by one, so a small one costs nothing. */
    rocksdb_options_set_writable_file_max_buffer_size(opts, MF_CATALOG_FILE_BUFFER_BYTES);
}

/* Each open replays the write-ahead logs the last flush left (avoid_flush_during_recovery:
 * no table file is written at open, catalog_internal.h); past MF_CATALOG_WAL_FILES of
 * them the memtable is flushed once, so an open never replays more than that. */
static int wal_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        n += len > 4 && strcmp(de->d_name + len - 4, ".log") == 0;
    }
    closedir(d);
    return n;
}

static int open_db(mf_catalog *c, pb_error *err)
{
    char *e = NULL;
    c->db = rocksdb_open(c->opts, c->dir, &e);
    if (e)
        return mfc_db_fail(c, err, e, "open");
    if (wal_files(c->dir) <= MF_CATALOG_WAL_FILES)
        return 0;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    rocksdb_flush(c->db, fo, &e);
    rocksdb_flushoptions_destroy(fo);
    return e ? mfc_db_fail(c, err, e, "flushing the replayed write-ahead logs") : 0;
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
        return mfc_db_fail(c, err, e, "removing the damaged catalog");
    atomic_store(&c->damaged, false);
    return open_db(c, err);
}

/* RocksDB's defaults, but no table file written at open (catalog_internal.h). */
static int set_recovery_options(mf_catalog *c, pb_error *err)
{
    rocksdb_options_t *o = rocksdb_options_create();
    char *e = NULL;
    rocksdb_get_options_from_string(c->opts, "avoid_flush_during_recovery=true", o, &e);
    if (e) {
        rocksdb_options_destroy(o);
        return mfc_db_fail(c, err, e, "setting the recovery options");
    }
    rocksdb_options_destroy(c->opts);
    c->opts = o;
    return 0;
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
    c->cache = rocksdb_cache_create_lru(MF_CATALOG_CACHE_BYTES);
    rocksdb_options_set_create_if_missing(c->opts, 1);
    rocksdb_options_set_paranoid_checks(c->opts, 1);
    /* Values are hashes: nothing for a compressor to find. */
    rocksdb_options_set_compression(c->opts, rocksdb_no_compression);
    set_table_options(c->opts, c->cache);
    set_memory_options(c->opts);
    set_log_options(c->opts);
    c->ropts = rocksdb_readoptions_create();
    rocksdb_readoptions_set_verify_checksums(c->ropts, 1);
    c->wopts = rocksdb_writeoptions_create();
    /* No write is synced. The catalog is a cache (DESIGN rule 7): after a power loss
     * RocksDB's WAL replay (point-in-time recovery, the default, stops at the first torn
     * record; WAL files are never recycled) keeps a prefix of the batches, so the head is
     * the old one, none (the first batch removes it), or the new one (the last writes
     * it: catalog_apply.c). The first two differ from the repository's newest backup,
     * and chain_sync_catalog rebuilds the catalog from the committed manifests. The logs
     * of earlier opens are replayed too, before this one's (an open flushes none into a
     * table file, catalog_internal.h), so the prefix spans them all. */
    rocksdb_writeoptions_set_sync(c->wopts, 0);
    c->wopts_nosync = rocksdb_writeoptions_create();
    c->batch_limit = MF_CATALOG_BATCH_LIMIT;
    int rc = set_recovery_options(c, err);
    if (rc == 0)
        rc = open_db(c, err);
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
    char *e = NULL;
    if (c->db && atomic_load(&c->damaged)) { /* the next open starts empty: rebuilt */
        rocksdb_destroy_db(c->opts, c->dir, &e);
        if (e)
            pb_warn("catalog %s: removing the damaged catalog: %s", c->dir, e);
        rocksdb_free(e);
    }
    if (c->opts)
        rocksdb_options_destroy(c->opts);
    if (c->ropts)
        rocksdb_readoptions_destroy(c->ropts);
    if (c->wopts)
        rocksdb_writeoptions_destroy(c->wopts);
    if (c->wopts_nosync)
        rocksdb_writeoptions_destroy(c->wopts_nosync);
    if (c->cache) /* our reference; the options' table factory dropped its own */
        rocksdb_cache_destroy(c->cache);
    free(c->dir);
    free(c);
}

int mfc_read_head(mf_catalog *c, const rocksdb_readoptions_t *ro, char out[MF_ID_LEN],
                     pb_error *err)
{
    char *e = NULL;
    size_t len = 0;
    char *v = rocksdb_get(c->db, ro, "S", 1, &len, &e);
    if (e)
        return mfc_db_fail(c, err, e, "reading the head id");
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
    int rc = atomic_load(&c->damaged) ? PB_ECORRUPT : mfc_read_head(c, c->ropts, out, err);
    if (rc == PB_ECORRUPT)
        return pb_fail(err, PB_ENOENT, "catalog %s is damaged: no head (it is rebuilt from "
                       "the repository)", c->dir);
    return rc;
}

bool mf_catalog_damaged(const mf_catalog *c)
{
    return atomic_load(&c->damaged);
}

/* Every key starts with 'F', 'H' or 'S': ["", "\xff") holds them all. */
void mfc_batch_clear_all(rocksdb_writebatch_t *b)
{
    rocksdb_writebatch_delete_range(b, "", 0, "\xff", 1);
}

int mf_catalog_reset(mf_catalog *c, pb_error *err)
{
    if (atomic_load(&c->damaged)) {
        pb_fail(err, PB_ECORRUPT, "catalog %s: a damaged block was read", c->dir);
        return reopen_empty(c, err);
    }
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();
    mfc_batch_clear_all(b);
    char *e = NULL;
    rocksdb_write(c->db, c->wopts, b, &e);
    rocksdb_writebatch_destroy(b);
    return e ? mfc_db_fail(c, err, e, "reset") : 0;
}

/* ---- lookup ---- */

/* Read the npages hashes of path: its chunks are consecutive keys after one seek. */
static int read_chunks(mf_catalog *c, rocksdb_iterator_t *it, const char *path,
                       uint32_t npages, uint64_t *out, pb_error *err)
{
    char key[KEY_MAX];
    size_t plen = strlen(path);
    rocksdb_iter_seek(it, key, mfc_key_h(key, path, plen, 0));
    for (uint64_t ci = 0; ci < mfc_nchunks(npages); ci++, rocksdb_iter_next(it)) {
        size_t klen = mfc_key_h(key, path, plen, (uint32_t)ci), got_klen, vlen;
        uint32_t n = mfc_chunk_len(npages, ci);
        const char *k = rocksdb_iter_valid(it) ? rocksdb_iter_key(it, &got_klen) : NULL;
        const char *v = k ? rocksdb_iter_value(it, &vlen) : NULL;
        if (!k || got_klen != klen || memcmp(k, key, klen) != 0 || vlen != (size_t)n * 8) {
            char *e = NULL;
            rocksdb_iter_get_error(it, &e);
            if (e)
                return mfc_db_fail(c, err, e, path);
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
    char *v = rocksdb_get(c->db, ro, key, mfc_key_f(key, path), &len, &e);
    if (e)
        return mfc_db_fail(c, err, e, path);
    if (!v)
        return pb_fail(err, PB_ENOENT, "catalog %s: %s is not in the head", c->dir, path);
    f_value fv;
    int rc = mfc_f_decode(v, len, &fv);
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
    if (atomic_load(&c->damaged))
        return pb_fail(err, PB_ENOENT, "catalog %s is damaged: %s is not known", c->dir, path);
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
    /* Damage (a checksum RocksDB verified on this read, or an entry we cannot decode):
     * the catalog is dropped, not the backup. Every lookup from now on answers "not in
     * the head", so each file is read and shipped whole (always safe, DESIGN rule 3), and
     * mf_catalog_close removes the catalog, which the next backup rebuilds. */
    if (rc == PB_ECORRUPT)
        atomic_store(&c->damaged, true);
    if (rc == PB_ECORRUPT && !atomic_exchange(&c->damage_told, true))
        pb_warn("%s: the catalog is dropped; this backup ships every file it reads from now "
                "on, and the next one rebuilds the catalog from the repository", err->msg);
    if (rc == PB_ECORRUPT)
        rc = pb_fail(err, PB_ENOENT, "catalog %s is damaged: %s is not known", c->dir, path);
    return rc;
}

/* ---- introspection ---- */

void mf_catalog_set_batch_limit(mf_catalog *c, size_t bytes)
{
    c->batch_limit = bytes;
}

void mf_catalog_last_stats(const mf_catalog *c, mf_apply_stats *out)
{
    *out = c->last;
}

void mf_catalog_memory(mf_catalog *c, mf_catalog_mem *out)
{
    uint64_t v = 0;
    memset(out, 0, sizeof(*out));
    if (rocksdb_property_int(c->db, "rocksdb.cur-size-all-mem-tables", &v) == 0)
        out->memtables = v;
    if (rocksdb_property_int(c->db, "rocksdb.estimate-table-readers-mem", &v) == 0)
        out->table_readers = v;
    out->cache_usage = rocksdb_cache_get_usage(c->cache);
    out->batch_peak = c->last.batch_peak;
    out->memtables_bound = (uint64_t)MF_CATALOG_MEMTABLE_BYTES * MF_CATALOG_MEMTABLES;
    out->cache_bound = MF_CATALOG_CACHE_BYTES;
    out->batch_bound = c->batch_limit;
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
    return e ? mfc_db_fail(c, err, e, "counting keys") : 0;
}
