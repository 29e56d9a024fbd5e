/* tests/unit/manifest/manifest_fixtures.h — manifests built for the manifest runners
 * (manifest_test.c, manifest_catalog_test.c): REL files with page runs and hashes, other
 * kinds, and a directory tree removed after a catalog test. */
#ifndef PB_TEST_MANIFEST_FIXTURES_H
#define PB_TEST_MANIFEST_FIXTURES_H

#include "manifest/manifest.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static inline char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

/* A distinct, reproducible hash per (backup, path, page). */
static inline uint64_t hv(uint32_t backup, const char *path, uint32_t page)
{
    uint64_t x = pb_hash64(path, strlen(path)) ^ ((uint64_t)backup << 40) ^ page;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

static inline mf_manifest *new_manifest(const char *id, const char *parent, char type)
{
    mf_backup h;
    memset(&h, 0, sizeof(h));
    snprintf(h.id, sizeof(h.id), "%s", id);
    snprintf(h.parent, sizeof(h.parent), "%s", parent);
    h.type = type;
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    if (mf_new(&m, &h, &err))
        abort();
    return m;
}

/* A REL record of npages pages at path (which it takes: allocated by the caller, may be
 * NULL); runs and hashes are the caller's. */
static inline mf_file rel_record(char *path, uint32_t npages)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = path;
    f.kind = MF_REL;
    f.mode = 0600;
    f.npages = npages;
    f.size = (uint64_t)npages * PB_PAGE_SIZE;
    return f;
}

/* A REL file shipping the given (first, count) ranges, cut into runs of at most 700
 * pages so runs cross 8192-page chunk boundaries; reverse lists the runs backwards. */
static inline int add_rel(mf_manifest *m, uint32_t backup, const char *path, uint32_t npages,
                   int reverse, int nranges, ...)
{
    mf_file f = rel_record(xstrdup(path), npages);
    uint32_t firsts[4096], counts[4096], nr = 0;
    va_list ap;
    va_start(ap, nranges);
    for (int i = 0; i < nranges; i++) {
        uint32_t first = va_arg(ap, unsigned), count = va_arg(ap, unsigned);
        for (uint32_t p = first; p < first + count; p += 700) {
            firsts[nr] = p;
            counts[nr++] = first + count - p < 700 ? first + count - p : 700;
        }
    }
    va_end(ap);
    uint64_t total = 0;
    for (uint32_t i = 0; i < nr; i++)
        total += counts[i];
    f.nruns = nr;
    f.runs = calloc(nr ? nr : 1, sizeof(*f.runs));
    f.page_hashes = malloc((total ? total : 1) * 8);
    uint64_t at = 0;
    for (uint32_t j = 0; j < nr; j++) {
        uint32_t i = reverse ? nr - 1 - j : j;
        f.runs[j] = (mf_run){firsts[i], counts[i], backup, 100 + i, 4096ull * i,
                             counts[i] * 8192, 0};
        for (uint32_t p = 0; p < counts[i]; p++)
            f.page_hashes[at++] = hv(backup, path, firsts[i] + p);
    }
    pb_error err = PB_ERROR_INIT;
    int rc = mf_add_file(m, &f, &err);
    if (rc)
        fprintf(stderr, "(add_rel %s refused: %s)\n", path, err.msg);
    mf_file_clear(&f);
    return rc;
}

/* A REL file shipping one run [first, first + count) with the given hashes. */
static inline int add_rel_hashes(mf_manifest *m, const char *path, uint32_t npages, uint32_t first,
                          uint32_t count, const uint64_t *hashes)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = xstrdup(path);
    f.kind = MF_REL;
    f.npages = npages;
    f.size = (uint64_t)npages * PB_PAGE_SIZE;
    f.nruns = 1;
    f.runs = calloc(1, sizeof(*f.runs));
    f.runs[0] = (mf_run){first, count, 9, 9, 9, 9, 0};
    f.page_hashes = malloc(count * 8);
    memcpy(f.page_hashes, hashes, count * 8);
    pb_error err = PB_ERROR_INIT;
    int rc = mf_add_file(m, &f, &err);
    mf_file_clear(&f);
    return rc;
}

static inline int add_other(mf_manifest *m, const char *path, mf_kind kind, uint64_t hash,
                     const char *stored_in, const char *target)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = xstrdup(path);
    f.kind = kind;
    f.mode = kind == MF_DIR ? 0700 : 0600;
    f.mtime = 1700000000;
    f.hash = hash;
    if (stored_in)
        snprintf(f.stored_in, sizeof(f.stored_in), "%s", stored_in);
    if (target)
        f.link_target = xstrdup(target);
    if (kind == MF_FILE) {
        f.size = 8192 * 3 + 10;
        f.nruns = 2;
        f.runs = calloc(2, sizeof(*f.runs));
        f.runs[0] = (mf_run){0, 1, 7, 1000, 0, 65536, 0};
        f.runs[1] = (mf_run){1, 1, 7, 20, 1000, 10, 0};
    }
    pb_error err = PB_ERROR_INIT;
    int rc = mf_add_file(m, &f, &err);
    mf_file_clear(&f);
    return rc;
}

static inline int rm_entry(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(p);
}

static inline void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
