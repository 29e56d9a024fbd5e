/* tests/unit/manifest/catalog_memory_test.c — the catalog's memory is fixed by
 * configuration, not by the size of the head (memory bounds): a full of 24 segments of 1 GiB
 * (3 Mi pages, 24 MiB of hashes) and an incremental on it are applied, every file is
 * looked up, and the memtables, the block cache, the table readers outside it and the
 * largest write batch stay within the catalog's bounds (catalog_internal.h). RocksDB's
 * defaults (64 MiB memtables, one 64 MiB batch) hold the whole head at this size. */
#include "manifest/manifest.h"
#include "manifest/manifest_internal.h"
#include "tests/unit/pbtest.h"
#include "tests/unit/manifest/manifest_fixtures.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SEGS 24u
#define SEG_PAGES 131072u

static void seg_path(char *out, size_t cap, unsigned seg)
{
    if (seg)
        snprintf(out, cap, "base/5/16384.%u", seg);
    else
        snprintf(out, cap, "base/5/16384");
}

/* A 1 GiB segment shipping pages [first, first + count) in runs of 1024 pages. */
static int add_seg(mf_manifest *m, unsigned seg, uint32_t first, uint32_t count, uint64_t salt)
{
    char path[64];
    seg_path(path, sizeof(path), seg);
    mf_file f = rel_record(strdup(path), SEG_PAGES);
    f.nruns = (count + 1023) / 1024;
    f.runs = calloc(f.nruns ? f.nruns : 1, sizeof(*f.runs));
    f.page_hashes = malloc((count ? count : 1) * sizeof(uint64_t));
    if (!f.path || !f.runs || !f.page_hashes) {
        mf_file_clear(&f);
        return -1;
    }
    for (uint32_t r = 0; r < f.nruns; r++) {
        uint32_t n = count - r * 1024 < 1024 ? count - r * 1024 : 1024;
        f.runs[r] = (mf_run){first + r * 1024, n, r, 4096, 4096ull * r, n * 8192, 0};
    }
    for (uint32_t i = 0; i < count; i++)
        f.page_hashes[i] = (salt << 40) ^ ((uint64_t)seg << 20) ^ (first + i);
    pb_error err = PB_ERROR_INIT;
    int rc = mf_add_file(m, &f, &err);
    if (rc)
        fprintf(stderr, "(add_seg %s refused: %s)\n", path, err.msg);
    mf_file_clear(&f);
    return rc;
}

static void report(const char *when, const mf_catalog_mem *mem)
{
    printf("  %s: memtables %.1f MiB (bound %.1f), cache %.1f MiB (bound %.1f), table readers "
           "%.1f KiB, largest batch %.1f MiB (limit %.1f)\n", when, mem->memtables / 1048576.0,
           mem->memtables_bound / 1048576.0, mem->cache_usage / 1048576.0,
           mem->cache_bound / 1048576.0, mem->table_readers / 1024.0,
           mem->batch_peak / 1048576.0, mem->batch_bound / 1048576.0);
}

/* The bounds: a batch may pass its limit by one file's chunks (1 MiB for a segment);
 * memtables by one arena block; table readers hold no index or filter outside the cache. */
static void check_bounded(const mf_catalog_mem *mem)
{
    PBT_CHECK(mem->memtables_bound <= 16u << 20 && mem->cache_bound <= 16u << 20);
    PBT_CHECK(mem->memtables <= mem->memtables_bound + (1u << 20));
    PBT_CHECK(mem->cache_usage <= mem->cache_bound);
    PBT_CHECK(mem->table_readers <= 256u << 10);
    PBT_CHECK(mem->batch_peak <= mem->batch_bound + (SEG_PAGES * 8 + (64u << 10)));
    PBT_CHECK(mem->batch_bound <= 8u << 20);
}

static void lookup_all(mf_catalog *cat, uint64_t salt_lo, uint32_t changed)
{
    int ok = 1;
    for (unsigned s = 0; s < SEGS; s++) {
        char path[64];
        seg_path(path, sizeof(path), s);
        mf_head_entry e;
        pb_error err = PB_ERROR_INIT;
        if (mf_catalog_lookup(cat, path, &e, &err) != 0 || e.npages != SEG_PAGES) {
            ok = 0;
            continue;
        }
        for (uint32_t p = 0; p < SEG_PAGES; p += 997) {
            uint64_t salt = p < changed ? salt_lo + 1 : salt_lo;
            ok &= e.hashes[p] == ((salt << 40) ^ ((uint64_t)s << 20) ^ p);
        }
        free(e.hashes);
    }
    PBT_CHECK(ok);
}

static void test_catalog_memory_bounded(void)
{
    char dir[4096], db[4200];
    PBT_CHECK(pbt_tmpdir(dir, sizeof(dir), "catmem") == 0);
    snprintf(db, sizeof(db), "%s/catalog", dir);
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = NULL;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    mf_manifest *full = new_manifest("B1", "", 'F');
    PBT_CHECK(full != NULL);
    if (!cat || !full)
        goto out;
    int rc = 0;
    for (unsigned s = 0; s < SEGS && !rc; s++)
        rc = add_seg(full, s, 0, SEG_PAGES, 1);
    PBT_CHECK(rc == 0);
    PBT_CHECK(mf_catalog_apply(cat, full, &err) == 0);
    mf_catalog_mem mem;
    mf_catalog_memory(cat, &mem);
    report("after the full", &mem);
    check_bounded(&mem);
    mf_apply_stats st;
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.batches >= 4); /* 24 MiB of hashes went in several batches */
    /* no fsync at all: the catalog is rebuilt from the manifests when its head is not
     * the repository's newest (catalog.c, mf_catalog_open) */
    PBT_CHECK(st.synced == 0);

    /* An incremental changing the first 4096 pages of every segment: the old chunks
     * are read (through the cache) and merged. */
    mf_manifest *incr = new_manifest("B2", "B1", 'I');
    PBT_CHECK(incr != NULL);
    for (unsigned s = 0; incr && s < SEGS && !rc; s++)
        rc = add_seg(incr, s, 0, 4096, 2);
    PBT_CHECK(incr && rc == 0);
    PBT_CHECK(incr && mf_catalog_apply(cat, incr, &err) == 0);
    lookup_all(cat, 1, 4096);
    mf_catalog_memory(cat, &mem);
    report("after the incremental and a lookup of every file", &mem);
    check_bounded(&mem);
    char head[MF_ID_LEN];
    PBT_CHECK(mf_catalog_head(cat, head, &err) == 0 && strcmp(head, "B2") == 0);
    mf_free(incr);

    /* Reopened (the open verifies every key): the bounds hold from the start too. */
    mf_catalog_close(cat);
    cat = NULL;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (cat) {
        lookup_all(cat, 1, 4096);
        mf_catalog_memory(cat, &mem);
        report("reopened, every file looked up", &mem);
        check_bounded(&mem);
    }
out:
    mf_free(full);
    mf_catalog_close(cat);
    pbt_rmtree(dir);
}

int main(void)
{
    PBT_RUN(test_catalog_memory_bounded);
    return PBT_DONE();
}
