/* tests/unit/manifest/manifest_test.c — manifests and their object format: path safety,
 * adding and finding files, round trips, extension fields, unsafe paths and corrupt objects
 * refused. The catalog is in manifest_catalog_test.c. */
#include "manifest/manifest.h"
#include "manifest/v2_internal.h"
#include "tests/unit/pbtest.h"
#include "tests/unit/manifest/manifest_fixtures.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- paths ---- */

static void test_path_safety(void)
{
    const char *good[] = {"a", "base/1/1259", "pg_tblspc/16384", "a.b", "..a", "a/.b", "a/b..",
                          "global/pg_control"};
    const char *bad[] = {"", "/etc/passwd", "../x", "a/../b", "a//b", ".", "..", "a/.", "a/",
                         "./a", "a/..", "/"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        PBT_CHECK(mf_path_is_safe(good[i]));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        PBT_CHECK(!mf_path_is_safe(bad[i]));
    PBT_CHECK(!mf_path_is_safe(NULL));
    char *longp = malloc(4097);
    memset(longp, 'a', 4096);
    longp[4096] = '\0';
    PBT_CHECK(!mf_path_is_safe(longp));
    longp[4095] = '\0';
    PBT_CHECK(mf_path_is_safe(longp));
    free(longp);
}

/* ---- manifests in memory ---- */

static void test_add_find(void)
{
    mf_manifest *m = new_manifest("B1", "", 'F');
    PBT_CHECK(add_other(m, "zeta", MF_DIR, 0, NULL, NULL) == 0);
    PBT_CHECK(add_other(m, "alpha", MF_DIR, 0, NULL, NULL) == 0);
    PBT_CHECK(add_rel(m, 1, "mid/1", 10, 0, 1, 0, 10) == 0);
    PBT_CHECK(mf_count(m) == 3);
    PBT_CHECK(mf_find(m, "alpha") != NULL); /* works before mf_sort too */
    mf_sort(m);
    PBT_CHECK(strcmp(mf_at(m, 0)->path, "alpha") == 0);
    PBT_CHECK(strcmp(mf_at(m, 2)->path, "zeta") == 0);
    PBT_CHECK(mf_at(m, 3) == NULL);
    PBT_CHECK(mf_find(m, "mid/1") && mf_find(m, "mid/1")->npages == 10);
    PBT_CHECK(mf_find(m, "mid") == NULL);
    PBT_CHECK(mf_find(m, "zz") == NULL);

    /* rejected files stay the caller's */
    pb_error err = PB_ERROR_INIT;
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = xstrdup("../escape");
    f.kind = MF_DIR;
    PBT_CHECK(mf_add_file(m, &f, &err) == PB_EINVAL);
    PBT_CHECK(f.path != NULL && strstr(err.msg, "../escape") != NULL);
    mf_file_clear(&f);
    PBT_CHECK(f.path == NULL);
    PBT_CHECK(add_rel(m, 1, "over", 10, 0, 1, 5, 6) == PB_EINVAL); /* beyond npages */
    PBT_CHECK(add_other(m, "lnk", MF_LINK, 0, NULL, NULL) == PB_EINVAL); /* no target */
    /* overlapping runs */
    memset(&f, 0, sizeof(f));
    f.path = xstrdup("ovl");
    f.kind = MF_REL;
    f.npages = 10;
    f.size = 10 * PB_PAGE_SIZE;
    f.nruns = 2;
    f.runs = calloc(2, sizeof(*f.runs));
    f.runs[0] = (mf_run){4, 4, 0, 0, 0, 0, 0};
    f.runs[1] = (mf_run){0, 5, 0, 0, 0, 0, 0};
    f.page_hashes = calloc(9, 8);
    PBT_CHECK(mf_add_file(m, &f, &err) == PB_EINVAL);
    f.runs[1].count = 4; /* [0,4) and [4,8): fine, even out of order */
    PBT_CHECK(mf_add_file(m, &f, &err) == 0);
    mf_file_clear(&f);
    PBT_CHECK(mf_count(m) == 4);

    /* a duplicate path cannot be serialised */
    PBT_CHECK(add_other(m, "alpha", MF_DIR, 0, NULL, NULL) == 0);
    pb_buf b = {0};
    PBT_CHECK(mf_serialize(m, &b, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "alpha") != NULL);
    PBT_CHECK(b.len == 0);
    pb_buf_free(&b);
    mf_free(m);
    mf_free(NULL);
    mf_file_clear(NULL);
}

/* ---- object format ---- */

static mf_manifest *sample_manifest(void)
{
    mf_manifest *m = new_manifest("20261130-101500I", "20261129-101500F", 'I');
    mf_backup *h = mf_header(m);
    h->start_lsn = 0x1234567890ull;
    h->stop_lsn = 0x1234567999ull;
    h->timeline = 3;
    h->system_id = 7301234567890123456ull;
    h->pg_version = 150020;
    h->wal_segment_size = 16 << 20;
    h->data_checksums = true;
    h->start_time = 1764497700;
    h->stop_time = -5;
    snprintf(h->start_wal, sizeof(h->start_wal), "000000030000001200000034");
    snprintf(h->stop_wal, sizeof(h->stop_wal), "000000030000001200000035");
    h->files = 6;
    h->pages_scanned = 1u << 30;
    h->pages_changed = 77;
    h->pages_in_window = 5;
    h->bytes_read = 1ull << 40;
    h->bytes_stored = 123456;
    h->checksum_errors = 1;
    h->collisions = 2;
    h->seconds = 12.625;
    add_rel(m, 2, "base/5/16384", 20000, 1, 3, 0, 3, 8190, 5, 19999, 1);
    add_other(m, "pg_tblspc/16400", MF_LINK, 0, NULL, "/mnt/ts1");
    add_other(m, "global/pg_control", MF_FILE, 0xfeedface12345678ull, "20261129-101500F", NULL);
    add_other(m, "base/5", MF_DIR, 0, NULL, NULL);
    add_rel(m, 2, "base/5/empty", 0, 0, 0);
    add_rel(m, 2, "base/5/16384.1", 3, 0, 0); /* unchanged: nothing shipped */
    return m;
}

static int files_equal(const mf_file *a, const mf_file *b)
{
    if (strcmp(a->path, b->path) || a->kind != b->kind || a->mode != b->mode ||
        a->size != b->size || a->mtime != b->mtime || a->hash != b->hash ||
        strcmp(a->stored_in, b->stored_in) || a->npages != b->npages || a->nruns != b->nruns)
        return 0;
    if ((a->link_target == NULL) != (b->link_target == NULL) ||
        (a->link_target && strcmp(a->link_target, b->link_target)))
        return 0;
    for (uint32_t i = 0; i < a->nruns; i++) {
        const mf_run *x = &a->runs[i], *y = &b->runs[i];
        if (x->first != y->first || x->count != y->count || x->pack_no != y->pack_no ||
            x->clen != y->clen || x->offset != y->offset || x->rlen != y->rlen)
            return 0;
    }
    uint64_t nh = a->kind == MF_REL ? mf_shipped_pages(a) : 0;
    return !nh || memcmp(a->page_hashes, b->page_hashes, nh * 8) == 0;
}

static void test_roundtrip(void)
{
    mf_manifest *m = sample_manifest();
    PBT_CHECK(mf_count(m) == 6);
    pb_error err = PB_ERROR_INIT;
    pb_buf b = {0}, b2 = {0};
    PBT_CHECK(mf_serialize(m, &b, &err) == 0);
    PBT_CHECK(b.len > 100 && memcmp(b.data, "PBMANIF1", 8) == 0);
    mf_manifest *p = NULL;
    int rc = mf_parse(b.data, b.len, "rt", &p, &err);
    PBT_CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    PBT_CHECK(memcmp(mf_header_c(p), mf_header_c(m), sizeof(mf_backup)) == 0 ||
              (strcmp(mf_header_c(p)->id, "20261130-101500I") == 0 &&
               mf_header_c(p)->stop_lsn == 0x1234567999ull &&
               mf_header_c(p)->seconds == 12.625 && mf_header_c(p)->stop_time == -5));
    const mf_backup *h = mf_header_c(p);
    PBT_CHECK(h->type == 'I' && strcmp(h->parent, "20261129-101500F") == 0 &&
              h->timeline == 3 && h->system_id == 7301234567890123456ull &&
              h->data_checksums && h->collisions == 2 && h->bytes_read == 1ull << 40 &&
              strcmp(h->stop_wal, "000000030000001200000035") == 0);
    PBT_CHECK(mf_count(p) == 6);
    mf_sort(m);
    for (size_t i = 0; i < mf_count(p) && i < mf_count(m); i++)
        PBT_CHECK(files_equal(mf_at(p, i), mf_at(m, i)));
    for (size_t i = 1; i < mf_count(p); i++)
        PBT_CHECK(strcmp(mf_at(p, i - 1)->path, mf_at(p, i)->path) < 0);
    const mf_file *rel = mf_find(p, "base/5/16384");
    PBT_CHECK(rel && rel->nruns == 3 && rel->npages == 20000 && rel->runs[0].first == 19999);
    PBT_CHECK(rel && rel->page_hashes[0] == hv(2, "base/5/16384", 19999));
    const mf_file *lnk = mf_find(p, "pg_tblspc/16400");
    PBT_CHECK(lnk && lnk->kind == MF_LINK && strcmp(lnk->link_target, "/mnt/ts1") == 0);
    /* deterministic: the parsed manifest serialises to the same bytes */
    PBT_CHECK(mf_serialize(p, &b2, &err) == 0);
    PBT_CHECK(b2.len == b.len && memcmp(b.data, b2.data, b.len) == 0);
out:
    mf_free(p);
    mf_free(m);
    pb_buf_free(&b);
    pb_buf_free(&b2);
}

static void reseal(pb_buf *b)
{
    pb_put_u64(b->data + b->len - 8, pb_hash64(b->data, b->len - 8));
}

static int parse_code(const pb_buf *b, pb_error *err)
{
    mf_manifest *p = NULL;
    int rc = mf_parse(b->data, b->len, "obj-under-test", &p, err);
    mf_free(p);
    return rc;
}

/* Serialise a manifest with one directory at `safe`, then swap in `evil` (same length)
 * with a valid checksum: only the path check can catch it. */
/* These check the version 1 reader (existing repositories) on objects of the version 1
 * writer; tests/unit/manifest_v2_test.c checks version 2. */
static void check_evil_path(const char *safe, const char *evil)
{
    mf_manifest *m = new_manifest("B", "", 'F');
    add_other(m, safe, MF_DIR, 0, NULL, NULL);
    pb_buf b = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize_v1(m, &b, &err) == 0);
    uint8_t *at = memmem(b.data, b.len, safe, strlen(safe));
    PBT_CHECK(at != NULL && strlen(safe) == strlen(evil));
    if (at) {
        memcpy(at, evil, strlen(evil));
        reseal(&b);
        PBT_CHECK(parse_code(&b, &err) == PB_ECORRUPT);
        PBT_CHECK(strstr(err.msg, "obj-under-test") && strstr(err.msg, evil));
    }
    pb_buf_free(&b);
    mf_free(m);
}

/* The read-less fields travel in the extension block; a manifest written
 * before it (no flag, no block) still parses, with them 0. */
static void test_extension_fields(void)
{
    mf_manifest *m = sample_manifest();
    mf_backup *h = mf_header(m);
    h->read_mode = MF_READ_FILE;
    h->verify_scan = true;
    h->mtime_horizon = 1764500000;
    h->files_skipped = 41;
    h->bytes_skipped = 41ull << 30;
    h->pages_missed = 3;
    pb_error err = PB_ERROR_INIT;
    pb_buf b = {0};
    mf_manifest *p = NULL;
    /* Both versions carry them: v2 in its tagged header, v1 in the extension block. */
    for (int v = 2; v >= 1; v--) {
        b.len = 0;
        PBT_CHECK((v == 2 ? mf_serialize(m, &b, &err) : mf_serialize_v1(m, &b, &err)) == 0);
        PBT_CHECK(mf_parse(b.data, b.len, "ext", &p, &err) == 0);
        const mf_backup *q = p ? mf_header_c(p) : NULL;
        PBT_CHECK(q && q->read_mode == MF_READ_FILE && q->verify_scan &&
                  q->mtime_horizon == 1764500000 && q->files_skipped == 41 &&
                  q->bytes_skipped == 41ull << 30 && q->pages_missed == 3);
        mf_free(p);
        p = NULL;
    }
    /* Older layout: clear the flag (bit 1 of the checksum word, after magic, version, id,
     * parent, type, LSNs, timeline, system id, version, segment size), drop the block
     * (magic, count, 6 pairs of 12 bytes) and reseal. */
    size_t flag_at = 8 + 4 + (4 + strlen(h->id)) + (4 + strlen(h->parent)) + 4 + 8 + 8 + 4 +
                     8 + 4 + 4;
    PBT_CHECK(b.len > flag_at + 4 && (b.data[flag_at] & 2));
    if (b.len > flag_at + 4) {
        b.data[flag_at] &= (uint8_t)~2u;
        b.len -= 8 + 6 * 12;
        reseal(&b);
        PBT_CHECK(mf_parse(b.data, b.len, "old", &p, &err) == 0);
        PBT_CHECK(p && mf_header_c(p)->read_mode == 0 && mf_header_c(p)->files_skipped == 0);
    }
    mf_free(p);
    mf_free(m);
    pb_buf_free(&b);
}

static void test_unsafe_paths_rejected(void)
{
    check_evil_path("aa/x", "../x");
    check_evil_path("xetc/passwd", "/etc/passwd");
    check_evil_path("a/xx/b", "a/../b");
    check_evil_path("a/xb", "a//b");
    /* a NUL inside a path */
    mf_manifest *m = new_manifest("B", "", 'F');
    add_other(m, "abc", MF_DIR, 0, NULL, NULL);
    pb_buf b = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize_v1(m, &b, &err) == 0);
    uint8_t *at = memmem(b.data, b.len, "abc", 3);
    PBT_CHECK(at != NULL);
    if (at) {
        at[1] = '\0';
        reseal(&b);
        PBT_CHECK(parse_code(&b, &err) == PB_ECORRUPT);
    }
    pb_buf_free(&b);
    mf_free(m);
}

static void test_corrupt_objects(void)
{
    mf_manifest *m = sample_manifest();
    pb_buf b = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize_v1(m, &b, &err) == 0);
    mf_free(m);

    /* any flipped byte */
    int all_corrupt = 1;
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x10;
        if (parse_code(&b, &err) != PB_ECORRUPT)
            all_corrupt = 0;
        b.data[i] ^= 0x10;
    }
    PBT_CHECK(all_corrupt);
    PBT_CHECK(parse_code(&b, &err) == 0);

    /* every truncation, resealed or not */
    int all_trunc = 1;
    pb_buf t = {0};
    for (size_t n = 0; n < b.len; n++) {
        t.len = 0;
        pb_buf_append(&t, b.data, n);
        if (parse_code(&t, &err) != PB_ECORRUPT)
            all_trunc = 0;
        if (n >= 20) {
            reseal(&t);
            if (parse_code(&t, &err) != PB_ECORRUPT)
                all_trunc = 0;
        }
    }
    PBT_CHECK(all_trunc);
    pb_buf_free(&t);
    pb_buf_free(&b);

    /* huge counts with a valid checksum: rejected before any allocation */
    m = new_manifest("B", "", 'F');
    add_rel(m, 1, "rel/file", 100, 0, 1, 10, 5);
    PBT_CHECK(mf_serialize_v1(m, &b, &err) == 0);
    mf_free(m);
    uint8_t *path = memmem(b.data, b.len, "rel/file", 8);
    PBT_CHECK(path != NULL);
    if (!path)
        return;
    size_t off_nfiles = (size_t)(path - b.data) - 4 - 8;
    /* path, kind, mode, size, mtime, link "", hash, stored_in "" */
    size_t off_npages = (size_t)(path - b.data) + 8 + 4 + 4 + 8 + 8 + 4 + 8 + 4;
    size_t off_nruns = off_npages + 4;
    size_t off_nhashes = off_nruns + 4 + 28;
    PBT_CHECK(pb_get_u64(b.data + off_nfiles) == 1);
    PBT_CHECK(pb_get_u32(b.data + off_npages) == 100);
    PBT_CHECK(pb_get_u32(b.data + off_nruns) == 1);
    PBT_CHECK(pb_get_u64(b.data + off_nhashes) == 5);
    struct { size_t off; int width; uint64_t value; } evil[] = {
        {off_nfiles, 8, UINT64_MAX}, {off_nfiles, 8, 1ull << 40}, {off_nfiles, 8, 2},
        {off_nruns, 4, UINT32_MAX},  {off_nruns, 4, 2},           {off_nhashes, 8, UINT64_MAX},
        {off_nhashes, 8, 6},         {off_npages, 4, 14},         {off_nfiles + 8, 4, 0},
        {off_nfiles + 8, 4, UINT32_MAX}, {off_nfiles + 8, 4, 4096}, {off_nfiles + 12, 4, 9},
    };
    for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
        pb_buf c = {0};
        pb_buf_append(&c, b.data, b.len);
        if (evil[i].width == 8)
            pb_put_u64(c.data + evil[i].off, evil[i].value);
        else
            pb_put_u32(c.data + evil[i].off, (uint32_t)evil[i].value);
        reseal(&c);
        int rc = parse_code(&c, &err);
        PBT_CHECK(rc == PB_ECORRUPT);
        if (rc != PB_ECORRUPT)
            fprintf(stderr, "evil #%zu: rc %d\n", i, rc);
        pb_buf_free(&c);
    }
    /* defect 10: npages sizes restore's per-page plan, so it must match the size and stay
     * under MF_REL_MAX_PAGES (old code: accepted, then restore calloc'd 32 GiB) */
    size_t off_size = (size_t)(path - b.data) + 8 + 4 + 4;
    PBT_CHECK(pb_get_u64(b.data + off_size) == 100 * PB_PAGE_SIZE);
    struct { uint64_t size; uint32_t npages; } lies[] = {
        {100 * PB_PAGE_SIZE, 200}, {(uint64_t)UINT32_MAX * PB_PAGE_SIZE, UINT32_MAX},
        {(uint64_t)(MF_REL_MAX_PAGES + 1) * PB_PAGE_SIZE, MF_REL_MAX_PAGES + 1}, {10, 100}};
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        pb_buf c = {0};
        pb_buf_append(&c, b.data, b.len);
        pb_put_u64(c.data + off_size, lies[i].size);
        pb_put_u32(c.data + off_npages, lies[i].npages);
        reseal(&c);
        PBT_CHECK(parse_code(&c, &err) == PB_ECORRUPT && strstr(err.msg, "rel/file"));
        pb_buf_free(&c);
    }
    /* the run error names the file */
    pb_put_u32(b.data + off_npages, 14);
    reseal(&b);
    PBT_CHECK(parse_code(&b, &err) == PB_ECORRUPT && strstr(err.msg, "rel/file"));
    /* a future version with a valid checksum is refused as unsupported */
    pb_put_u32(b.data + off_npages, 100);
    pb_put_u32(b.data + 8, 3);
    reseal(&b);
    PBT_CHECK(parse_code(&b, &err) == PB_EUNSUPPORTED);
    pb_put_u32(b.data + 8, 1);
    reseal(&b);
    PBT_CHECK(parse_code(&b, &err) == 0);
    PBT_CHECK(parse_code(&(pb_buf){(uint8_t *)"PBMANIF1", 8, 8}, &err) == PB_ECORRUPT);
    pb_buf_free(&b);
}

int main(void)
{
    PBT_RUN(test_path_safety);
    PBT_RUN(test_add_find);
    PBT_RUN(test_roundtrip);
    PBT_RUN(test_extension_fields);
    PBT_RUN(test_unsafe_paths_rejected);
    PBT_RUN(test_corrupt_objects);
    return PBT_DONE();
}
