/*
 * manifest/catalog_internal.h — private to the catalog (catalog.c, catalog_apply.c): the
 * handle, the key and value encodings (docs/MANIFEST.md, "RocksDB catalog"), and the
 * helpers both files use.
 */
#ifndef PB_MANIFEST_CATALOG_INTERNAL_H
#define PB_MANIFEST_CATALOG_INTERNAL_H

#include "manifest/manifest_internal.h"

#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdbool.h>

#define F_VALUE_LEN (4 + 4 + 8 + MF_ID_LEN)
#define KEY_MAX (1 + MF_PATH_MAX + 1 + 4)

struct mf_catalog {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_readoptions_t *ropts;
    rocksdb_writeoptions_t *wopts;
    rocksdb_writeoptions_t *wopts_nosync; /* an apply's batches before its last */
    char *dir;
    mf_apply_stats last;
    size_t batch_limit; /* bytes a write batch may hold before it is written */
    rocksdb_cache_t *cache; /* the block cache, index and filter blocks included */
    /* A read found damage (RocksDB verifies every block's checksum as it reads it): from
     * then on the catalog answers nothing and is removed at close (catalog.c). */
    _Atomic bool damaged;
    _Atomic bool damage_told; /* the lookups' warning, once */
};

/* Memory the catalog may hold, fixed whatever the size of the head (docs/MANIFEST.md,
 * "RocksDB catalog"): a write batch is written once it holds MF_CATALOG_BATCH_LIMIT bytes (plus one
 * file's chunks); at most MF_CATALOG_MEMTABLES memtables of MF_CATALOG_MEMTABLE_BYTES each
 * (RocksDB's default is 64 MiB each, filled by one apply of a large head); one LRU cache of
 * MF_CATALOG_CACHE_BYTES holds the data, index and filter blocks read (by default index and
 * filter blocks live outside any cache and grow with the catalog). */
#define MF_CATALOG_BATCH_LIMIT (1u << 20)
#define MF_CATALOG_MEMTABLE_BYTES (2u << 20)
#define MF_CATALOG_MEMTABLES 2
#define MF_CATALOG_CACHE_BYTES (4u << 20)
#define MF_CATALOG_FILE_BUFFER_BYTES (256u << 10) /* per file RocksDB writes */

/* Flushes per open: an open replays the write-ahead logs into the memtable and
 * writes no table file (avoid_flush_during_recovery); the logs stay until the memtable
 * is flushed, when it fills or when an open finds more than MF_CATALOG_WAL_FILES of them
 * (one per open that wrote: an unchanged incremental's apply is a few hundred bytes).
 * Crash safety is unchanged: no write is synced, so after a power loss the replay keeps
 * a prefix of the batches (catalog.c, mf_catalog_open). */
#define MF_CATALOG_WAL_FILES 16
#define MF_CATALOG_INFO_LOGS 4 /* RocksDB's LOG.old.* files kept */

typedef struct f_value {
    mf_kind kind;
    uint32_t npages;
    uint64_t hash;
    char stored_in[MF_ID_LEN];
} f_value;

size_t mfc_key_f(char *k, const char *path);
/* The key of one chunk; mfc_key_h_end is the (exclusive) end of all of path's chunks. */
size_t mfc_key_h(char *k, const char *path, size_t plen, uint32_t chunk);
size_t mfc_key_h_end(char *k, const char *path, size_t plen);
uint64_t mfc_nchunks(uint32_t npages);
uint32_t mfc_chunk_len(uint32_t npages, uint64_t ci);
void mfc_f_encode(uint8_t v[F_VALUE_LEN], const mf_file *f);
int mfc_f_decode(const char *v, size_t len, f_value *out);
/* Consume a RocksDB error string: Corruption maps to PB_ECORRUPT (and marks c damaged),
 * the rest to PB_EIO. */
int mfc_db_fail(mf_catalog *c, pb_error *err, char *dberr, const char *op);
/* Every key starts with 'F', 'H' or 'S': ["", "\xff") holds them all. */
void mfc_batch_clear_all(rocksdb_writebatch_t *b);
/* The "S" key: PB_ENOENT when absent. */
int mfc_read_head(mf_catalog *c, const rocksdb_readoptions_t *ro, char out[MF_ID_LEN],
                  pb_error *err);

#endif
