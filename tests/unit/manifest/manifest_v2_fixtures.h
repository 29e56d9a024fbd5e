/* tests/unit/manifest/manifest_v2_fixtures.h — sample manifests and comparisons shared by
 * the version 2 runners (manifest_v2_test.c, manifest_codec_test.c). */
#ifndef PB_TESTS_MANIFEST_V2_FIXTURES_H
#define PB_TESTS_MANIFEST_V2_FIXTURES_H

#include "manifest/manifest.h"
#include "manifest/v2_internal.h"
#include "tests/unit/pbtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

static inline uint64_t hv(uint32_t b, uint32_t file, uint32_t page)
{
    uint64_t x = ((uint64_t)b << 48) ^ ((uint64_t)file << 24) ^ page;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return (x ^ (x >> 29)) | 1; /* never the zero-page hash by accident */
}

static inline mf_backup header(const char *id, const char *parent, char type)
{
    mf_backup h;
    memset(&h, 0, sizeof(h));
    snprintf(h.id, sizeof(h.id), "%s", id);
    snprintf(h.parent, sizeof(h.parent), "%s", parent);
    h.type = type;
    h.stop_lsn = 0x1234567999ull;
    h.stop_time = -5;
    h.seconds = 12.625;
    snprintf(h.stop_wal, sizeof(h.stop_wal), "000000030000001200000035");
    /* pg_control's stop point and the read reason travel too (compared whole below) */
    h.ctl_recorded = true;
    h.ctl_checksum_version = 1;
    h.ctl_redo_lsn = 0x1234500028ull;
    h.ctl_checkpoint_lsn = 0x1234500060ull;
    h.ctl_timeline = 3;
    h.ctl_history_known = true;
    h.ctl_history_hash = 0xfeedbeefcafeull;
    snprintf(h.read_why, sizeof(h.read_why), "the data checksum version changed from 0 to 1");
    return h;
}

/* A REL file of npages shipping every `every`-th page as a one-page run (every 1: one
 * run of all pages); zero_from: pages at or after it hash as all-zero pages. */
static inline mf_file rel(uint32_t b, uint32_t file, uint32_t npages, uint32_t every,
                   uint32_t zero_from)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    char path[64];
    snprintf(path, sizeof(path), "base/5/%u", 100000 + file);
    f.path = xstrdup(path);
    f.kind = MF_REL;
    f.mode = 0600;
    f.npages = npages;
    f.size = (uint64_t)npages * PB_PAGE_SIZE;
    f.mtime = -7;
    f.inode = 1000 + file;
    uint32_t nr = every == 1 ? (npages ? 1 : 0) : (npages + every - 1) / every;
    f.nruns = nr;
    f.runs = calloc(nr ? nr : 1, sizeof(*f.runs));
    f.page_hashes = calloc(npages ? npages : 1, 8);
    uint64_t at = 0;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t first = every == 1 ? 0 : i * every, count = every == 1 ? npages : 1;
        f.runs[i] = (mf_run){first, count, b, 100 + count * 30, 16 + 4096ull * i,
                             count * 8192, i % 3};
        for (uint32_t p = 0; p < count; p++, at++)
            f.page_hashes[at] = first + p >= zero_from ? mf_zero_page_hash() : hv(b, file, first + p);
    }
    return f;
}

static inline void add(mf_manifest *m, mf_file f)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_add_file(m, &f, &err) == 0);
    mf_file_clear(&f);
}

static inline mf_manifest *sample(uint32_t b, uint32_t nfiles)
{
    mf_backup h = header(b ? "20261201-000100I" : "20261201-000000F", b ? "20261201-000000F" : "",
                         b ? 'I' : 'F');
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    if (mf_new(&m, &h, &err))
        abort();
    for (uint32_t i = 0; i < nfiles; i++)
        add(m, rel(b, i, 3 + i % 40, b ? 7 : 3, 30));
    mf_file l = {0};
    l.path = xstrdup("pg_tblspc/16400");
    l.kind = MF_LINK;
    l.mode = 0777;
    l.link_target = xstrdup("/mnt/ts1");
    add(m, l);
    mf_file w = {0};
    w.path = xstrdup("PG_VERSION");
    w.kind = MF_FILE;
    w.size = 3;
    w.hash = 42;
    snprintf(w.stored_in, sizeof(w.stored_in), "20261201-000000F");
    w.nruns = 1;
    w.runs = calloc(1, sizeof(*w.runs));
    w.runs[0] = (mf_run){0, 1, 1, 40, 16, 3, 0};
    add(m, w);
    mf_sort(m);
    return m;
}

static inline int same_file(const mf_file *a, const mf_file *b)
{
    if (strcmp(a->path, b->path) || a->kind != b->kind || a->mode != b->mode ||
        a->size != b->size || a->mtime != b->mtime || a->inode != b->inode ||
        a->npages != b->npages || a->nruns != b->nruns || a->hash != b->hash ||
        strcmp(a->stored_in, b->stored_in) ||
        (a->link_target != NULL) != (b->link_target != NULL) ||
        (a->link_target && strcmp(a->link_target, b->link_target)))
        return 0;
    if (a->nruns && memcmp(a->runs, b->runs, a->nruns * sizeof(mf_run)))
        return 0;
    uint64_t nh = a->kind == MF_REL ? mf_shipped_pages(a) : 0;
    return !nh || memcmp(a->page_hashes, b->page_hashes, nh * 8) == 0;
}

static inline int same_manifest(const mf_manifest *a, const mf_manifest *b)
{
    if (mf_count(a) != mf_count(b) || memcmp(mf_header_c(a), mf_header_c(b), sizeof(mf_backup)))
        return 0;
    for (size_t i = 0; i < mf_count(a); i++)
        if (!same_file(mf_at(a, i), mf_at(b, i)))
            return 0;
    return 1;
}

static inline int parse_code(const pb_buf *b, mf_manifest **keep)
{
    mf_manifest *p = NULL;
    pb_error err = PB_ERROR_INIT;
    int rc = mf_parse(b->data, b->len, "obj-under-test", &p, &err);
    if (keep)
        *keep = p;
    else
        mf_free(p);
    return rc;
}

/* ---- round trips, both versions ---- */

/* A writer's sink that appends to the pb_buf it is given. */
static inline int sink(void *ctx, const void *data, size_t len, pb_error *err)
{
    (void)err;
    return pb_buf_append(ctx, data, len);
}

#endif
