/*
 * manifest/manifest_internal.h — private to manifest/ (and its unit test): the
 * manifest struct, the file validation shared by mf_add_file, mf_serialize and
 * mf_parse, and the run ordering used by validation and by the catalog.
 */
#ifndef PB_MANIFEST_INTERNAL_H
#define PB_MANIFEST_INTERNAL_H

#include "manifest/manifest.h"

#define MF_MAGIC "PBMANIF1"
#define MF_VERSION 1u
#define MF_PATH_MAX 4096u
#define MF_CHUNK_PAGES 8192u /* pages per catalog "H" key */

struct mf_manifest {
    mf_backup hdr;
    mf_file *files;
    size_t count;
    size_t cap;
    bool sorted; /* files strictly ascending by path (strcmp) */
};

/* One REL run reduced to what page bookkeeping needs: where its hashes start in
 * page_hashes (prefix sum of the counts before it, in manifest order). */
typedef struct mf_run_ref {
    uint32_t first;
    uint32_t count;
    uint64_t hash_at;
} mf_run_ref;

/* Check one file's invariants (safe path, kind, REL runs inside npages and not
 * overlapping, LINK target, NUL-terminated stored_in). On failure returns `code`
 * (PB_EINVAL for caller input, PB_ECORRUPT for a parsed object) with a message
 * naming `what` and the path. */
int mf_check_file(const mf_file *f, int code, const char *what, pb_error *err);

/* Total shipped pages of a REL file (sum of run counts). */
uint64_t mf_shipped_pages(const mf_file *f);

/* The runs of a REL file sorted by first page, *out malloc'd (NULL when nruns == 0).
 * Fails with `code` if two runs overlap. */
int mf_runs_sorted(const mf_file *f, mf_run_ref **out, int code, const char *what,
                   pb_error *err);

/* Files in path order without modifying m: m->files itself when sorted, else a
 * malloc'd array of pointers (*owned set to it, caller frees). Fails with
 * PB_EINVAL on a duplicate path. */
int mf_sorted_view(const mf_manifest *m, const mf_file ***out, const mf_file ***owned,
                   const char *what, pb_error *err);

/* ---- catalog introspection for tests and logging ---- */
typedef struct mf_apply_stats {
    uint64_t files_put;     /* "F" keys written */
    uint64_t files_deleted; /* paths dropped from the head */
    uint64_t chunks_put;    /* "H" chunks written */
    uint64_t chunks_kept;   /* chunks of present REL files left untouched */
    uint64_t chunks_read;   /* old chunks read to merge */
    uint64_t batches;       /* write batches written (bounded: several for a large apply) */
    uint64_t batch_peak;    /* bytes of the largest batch written */
    uint64_t synced;        /* of the batches, those written with an fsync: none (catalog.c) */
} mf_apply_stats;

/* What the catalog holds in memory now, and the fixed bounds (catalog_internal.h). */
typedef struct mf_catalog_mem {
    uint64_t memtables, memtables_bound; /* RocksDB memtables, active and being flushed */
    uint64_t cache_usage, cache_bound;   /* the block cache: data, index and filter blocks */
    uint64_t table_readers;              /* table-reader memory outside the cache */
    uint64_t batch_peak, batch_bound;    /* the last apply's largest write batch; its limit */
} mf_catalog_mem;
void mf_catalog_memory(mf_catalog *c, mf_catalog_mem *out);

/* Counters of the last successful mf_catalog_apply. */
void mf_catalog_last_stats(const mf_catalog *c, mf_apply_stats *out);
/* Tests: the size at which an apply writes its batch and starts another. */
void mf_catalog_set_batch_limit(mf_catalog *c, size_t bytes);
/* Number of keys whose first byte is `prefix` ('F', 'H' or 'S'). */
int mf_catalog_count_keys(mf_catalog *c, char prefix, uint64_t *out, pb_error *err);
/* Has a read found the catalog damaged? (Then it answers nothing; removed at close.) */
bool mf_catalog_damaged(const mf_catalog *c);

#endif
