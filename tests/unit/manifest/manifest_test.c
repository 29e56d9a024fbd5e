/* tests/unit/manifest/manifest_test.c — manifests, their object format, and the catalog. */
#include "manifest/manifest.h"
#include "manifest/v2_internal.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

/* A distinct, reproducible hash per (backup, path, page). */
static uint64_t hv(uint32_t backup, const char *path, uint32_t page)
{
    uint64_t x = pb_hash64(path, strlen(path)) ^ ((uint64_t)backup << 40) ^ page;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

static mf_manifest *new_manifest(const char *id, const char *parent, char type)
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

/* A REL file shipping the given (first, count) ranges, cut into runs of at most 700
 * pages so runs cross 8192-page chunk boundaries; reverse lists the runs backwards. */
static int add_rel(mf_manifest *m, uint32_t backup, const char *path, uint32_t npages,
                   int reverse, int nranges, ...)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = xstrdup(path);
    f.kind = MF_REL;
    f.mode = 0600;
    f.npages = npages;
    f.size = (uint64_t)npages * PB_PAGE_SIZE;
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
        f.runs[j] = (mf_run){firsts[i], counts[i], backup, 100 + i, 4096ull * i, counts[i] * 8192, 0};
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
static int add_rel_hashes(mf_manifest *m, const char *path, uint32_t npages, uint32_t first,
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

static int add_other(mf_manifest *m, const char *path, mf_kind kind, uint64_t hash,
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

static int rm_entry(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(p);
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

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

/* The read-less fields (issue 11) travel in the extension block; a manifest written
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

/* ---- catalog against an in-memory model ---- */

typedef struct mentry {
    char path[64];
    mf_kind kind;
    uint32_t npages;
    uint64_t *h;
    uint64_t hash;
    char stored_in[MF_ID_LEN];
} mentry;

typedef struct model {
    mentry e[32];
    size_t n;
} model;

static void model_free(model *md)
{
    for (size_t i = 0; i < md->n; i++)
        free(md->e[i].h);
    md->n = 0;
}

static const mentry *model_find(const model *md, const char *path)
{
    for (size_t i = 0; i < md->n; i++)
        if (strcmp(md->e[i].path, path) == 0)
            return &md->e[i];
    return NULL;
}

/* The head after m, computed page by page the slow, obvious way. */
static void model_apply(model *md, const mf_manifest *m)
{
    model nm = {.n = 0};
    int full = mf_header_c(m)->type != 'I';
    for (size_t i = 0; i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        mentry *e = &nm.e[nm.n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->path, sizeof(e->path), "%s", f->path);
        e->kind = f->kind;
        if (f->kind == MF_FILE) {
            e->hash = f->hash;
            memcpy(e->stored_in, f->stored_in, MF_ID_LEN);
        }
        if (f->kind != MF_REL)
            continue;
        e->npages = f->npages;
        e->h = calloc(f->npages + 1, 8);
        const mentry *old = full ? NULL : model_find(md, f->path);
        for (uint32_t p = 0; p < f->npages; p++)
            if (old && old->kind == MF_REL && p < old->npages)
                e->h[p] = old->h[p];
        uint64_t at = 0;
        for (uint32_t r = 0; r < f->nruns; r++)
            for (uint32_t p = 0; p < f->runs[r].count; p++)
                e->h[f->runs[r].first + p] = f->page_hashes[at++];
    }
    model_free(md);
    *md = nm;
}

static const char *all_paths[] = {"base",          "base/1/100",   "base/1/200", "base/1/300",
                                  "base/1/400",    "base/1/500",   "global/pg_control",
                                  "pg_tblspc/16384", "base/1/100.1", "base/1/999"};

static int model_matches(mf_catalog *cat, const model *md, const char *head)
{
    int ok = 1;
    pb_error err = PB_ERROR_INIT;
    uint64_t want_chunks = 0, nkeys = 0;
    for (size_t i = 0; i < sizeof(all_paths) / sizeof(all_paths[0]); i++) {
        const mentry *e = model_find(md, all_paths[i]);
        mf_head_entry got;
        int rc = mf_catalog_lookup(cat, all_paths[i], &got, &err);
        if (!e) {
            if (rc != PB_ENOENT) {
                fprintf(stderr, "%s: expected absent, rc %d\n", all_paths[i], rc);
                ok = 0;
            }
            free(got.hashes);
            continue;
        }
        want_chunks += (e->npages + 8191u) / 8192u;
        if (rc || got.kind != e->kind || got.npages != e->npages ||
            (e->npages && memcmp(got.hashes, e->h, (size_t)e->npages * 8)) ||
            (e->kind == MF_FILE &&
             (got.hash != e->hash || strcmp(got.stored_in, e->stored_in)))) {
            fprintf(stderr, "%s: mismatch (rc %d %s, npages %u/%u)\n", all_paths[i], rc,
                    err.msg, got.npages, e->npages);
            ok = 0;
        }
        free(got.hashes);
    }
    char id[MF_ID_LEN];
    if (mf_catalog_head(cat, id, &err) || strcmp(id, head) != 0)
        ok = 0;
    /* no stale keys: exactly one chunk key per 8192 pages, one F key per file */
    if (mf_catalog_count_keys(cat, 'H', &nkeys, &err) || nkeys != want_chunks) {
        fprintf(stderr, "H keys %llu, want %llu\n", (unsigned long long)nkeys,
                (unsigned long long)want_chunks);
        ok = 0;
    }
    if (mf_catalog_count_keys(cat, 'F', &nkeys, &err) || nkeys != md->n)
        ok = 0;
    return ok;
}

static int buf_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    const pb_buf *b = ctx;
    if (off > b->len || len > b->len - off)
        return pb_fail(err, PB_ECORRUPT, "read past the end");
    memcpy(dst, b->data + off, len);
    return 0;
}

/* m applied from a version 2 stream of its serialized bytes (mf_catalog_apply_stream). */
static int apply_streamed(mf_catalog *cat, const mf_manifest *m, pb_error *err)
{
    pb_buf b = {0};
    mf_stream *s = NULL;
    int rc = mf_serialize(m, &b, err);
    mf_source src = {buf_read, NULL, &b, 0, NULL};
    src.size = b.len;
    if (rc == 0)
        rc = mf_stream_open(&s, &src, "test stream", err);
    if (rc == 0)
        rc = mf_catalog_apply_stream(cat, s, err);
    mf_stream_close(s);
    pb_buf_free(&b);
    return rc;
}

/* Backups whose id has an even digit (B2, B4, ...) are applied from a stream, the others
 * from the manifest in memory: the model checks both paths. */
static int apply_both(mf_catalog *cat, model *md, mf_manifest *m)
{
    pb_error err = PB_ERROR_INIT;
    const char *id = mf_header_c(m)->id;
    bool streamed = id[1] >= '0' && id[1] <= '9' && (id[1] - '0') % 2 == 0;
    int rc = streamed ? apply_streamed(cat, m, &err) : mf_catalog_apply(cat, m, &err);
    if (rc)
        fprintf(stderr, "apply %s: %s\n", mf_header_c(m)->id, err.msg);
    else
        model_apply(md, m);
    mf_free(m);
    return rc;
}

static void test_catalog_chain(void)
{
    char dir[] = "/tmp/mf_test.XXXXXX";
    PBT_CHECK(mkdtemp(dir) != NULL);
    char db[64];
    snprintf(db, sizeof(db), "%s/catalog", dir);
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = NULL;
    model md = {.n = 0};
    char id[MF_ID_LEN];
    mf_apply_stats st;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (!cat)
        return;
    PBT_CHECK(mf_catalog_head(cat, id, &err) == PB_ENOENT);

    /* B1: full */
    mf_manifest *m = new_manifest("B1", "", 'F');
    add_rel(m, 1, "base/1/100", 20000, 1, 1, 0, 20000);
    add_rel(m, 1, "base/1/200", 5, 0, 1, 0, 5);
    add_rel(m, 1, "base/1/300", 0, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 111, "B1", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    add_other(m, "pg_tblspc/16384", MF_LINK, 0, NULL, "/ts");
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B1"));

    /* B2: change pages across chunk edges, extend 200, new 400, drop the link */
    m = new_manifest("B2", "B1", 'I');
    add_rel(m, 2, "base/1/100", 20000, 0, 3, 0, 3, 8190, 5, 19999, 1);
    add_rel(m, 2, "base/1/200", 10, 0, 2, 1, 1, 5, 5);
    add_rel(m, 2, "base/1/300", 0, 0, 0);
    add_rel(m, 2, "base/1/400", 3, 0, 1, 0, 3);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B2"));
    mf_catalog_last_stats(cat, &st);
    /* 100: chunks 0, 1 (8190..8194 straddles 0/1) and 2 touched; 200 and 400 written */
    PBT_CHECK(st.chunks_put == 5 && st.files_deleted == 1);

    /* B3: one page of 100 changes: exactly one chunk written, the rest untouched */
    m = new_manifest("B3", "B2", 'I');
    add_rel(m, 3, "base/1/100", 20000, 0, 1, 9000, 1);
    add_rel(m, 3, "base/1/200", 10, 0, 0);
    add_rel(m, 3, "base/1/300", 0, 0, 0);
    add_rel(m, 3, "base/1/400", 3, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B3"));
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.chunks_put == 1 && st.files_put == 0 && st.files_deleted == 0);
    PBT_CHECK(st.chunks_read == 1);

    /* B4: truncate 100 to 8192 pages (chunks 1, 2 go), 200 to 3; 300 grows */
    m = new_manifest("B4", "B3", 'I');
    add_rel(m, 4, "base/1/100", 8192, 0, 0);
    add_rel(m, 4, "base/1/200", 3, 0, 1, 0, 1);
    add_rel(m, 4, "base/1/300", 2, 0, 1, 0, 2);
    add_rel(m, 4, "base/1/400", 3, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B4"));

    /* B5: extend 100 from 8192 to 17000 (new pages shipped, runs listed backwards),
     * add 500, and 400 becomes a plain file */
    m = new_manifest("B5", "B4", 'I');
    add_rel(m, 5, "base/1/100", 17000, 1, 2, 8192, 8808, 5, 2);
    add_rel(m, 5, "base/1/200", 3, 0, 0);
    add_rel(m, 5, "base/1/300", 2, 0, 0);
    add_other(m, "base/1/400", MF_FILE, 444, "B5", NULL);
    add_rel(m, 5, "base/1/500", 8193, 0, 1, 0, 8193);
    add_rel(m, 5, "base/1/100.1", 9000, 0, 1, 0, 9000);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B5"));

    /* B5b: drop 100 (its neighbour 100.1 shares the prefix and must stay); ship two
     * pages of 500 whose hashes did not change: read, compared, not rewritten */
    m = new_manifest("B5b", "B5", 'I');
    add_rel(m, 6, "base/1/200", 3, 0, 0);
    add_rel(m, 6, "base/1/300", 2, 0, 0);
    add_other(m, "base/1/400", MF_FILE, 444, "B5", NULL);
    const mentry *e500 = model_find(&md, "base/1/500");
    PBT_CHECK(e500 && e500->npages == 8193);
    if (e500)
        add_rel_hashes(m, "base/1/500", 8193, 8190, 2, e500->h + 8190);
    add_rel(m, 6, "base/1/100.1", 9000, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B5b"));
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.chunks_put == 0 && st.chunks_read == 1 && st.files_deleted == 1);

    /* reopen: the head persists */
    mf_catalog_close(cat);
    cat = NULL;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (!cat)
        goto out;
    PBT_CHECK(model_matches(cat, &md, "B5b"));

    /* an unshipped page the head does not have: the chain is inconsistent */
    m = new_manifest("B6", "B5b", 'I');
    add_rel(m, 6, "base/1/100.1", 9001, 0, 1, 3, 1);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "base/1/100.1") && strstr(err.msg, "9000"));
    mf_free(m);
    /* a new file in an incremental must ship everything */
    m = new_manifest("B6", "B5b", 'I');
    add_rel(m, 6, "base/1/999", 4, 0, 1, 0, 3);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    mf_free(m);
    /* a parent that is not the head */
    m = new_manifest("B6", "B4", 'I');
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ESTATE);
    mf_free(m);
    /* a full that does not ship every page */
    m = new_manifest("F2", "", 'F');
    add_rel(m, 7, "base/1/100", 10, 0, 1, 0, 9);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    mf_free(m);
    /* none of the failures changed anything */
    PBT_CHECK(model_matches(cat, &md, "B5b"));

    /* a synthetic full replaces the head */
    m = new_manifest("S1", "B5b", 'S');
    add_rel(m, 8, "base/1/200", 9000, 0, 1, 0, 9000);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "S1"));

    /* reset empties it */
    PBT_CHECK(mf_catalog_reset(cat, &err) == 0);
    PBT_CHECK(mf_catalog_head(cat, id, &err) == PB_ENOENT);
    model_free(&md);
    uint64_t n = 1;
    PBT_CHECK(mf_catalog_count_keys(cat, 'H', &n, &err) == 0 && n == 0);
    mf_head_entry e;
    PBT_CHECK(mf_catalog_lookup(cat, "base/1/200", &e, &err) == PB_ENOENT && !e.hashes);
    m = new_manifest("B7", "S1", 'I');
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ESTATE);
    mf_free(m);
out:
    model_free(&md);
    mf_catalog_close(cat);
    rm_tree(dir);
}

/* Flip one byte in the middle of the largest table file of a closed catalog. */
static int damage_largest(const char *db, int truncate_it)
{
    char cmd[512], path[512] = "";
    snprintf(cmd, sizeof(cmd), "ls -S '%s'/*.sst 2>/dev/null | head -n 1", db);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(path, sizeof(path), p)) {
        if (p)
            pclose(p);
        return -1;
    }
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
    struct stat st;
    int fd = open(path, O_RDWR);
    if (fd < 0 || fstat(fd, &st) != 0)
        return -1;
    int rc = 0;
    if (truncate_it) {
        rc = ftruncate(fd, st.st_size / 2);
    } else {
        uint8_t b;
        off_t at = st.st_size / 3;
        rc = pread(fd, &b, 1, at) == 1 && (b ^= 0x40, pwrite(fd, &b, 1, at) == 1) ? 0 : -1;
    }
    close(fd);
    return rc;
}

/* The catalog is a cache: a damaged one opens empty (head PB_ENOENT) so that the
 * backup rebuilds it from the repository, instead of failing every backup from now on
 * (old code: open or the first lookup fails with PB_ECORRUPT). */
static void test_catalog_damage_rebuilds(void)
{
    for (int truncate_it = 0; truncate_it < 2; truncate_it++) {
        char dir[] = "/tmp/mf_test.XXXXXX";
        PBT_CHECK(mkdtemp(dir) != NULL);
        char db[64];
        snprintf(db, sizeof(db), "%s/catalog", dir);
        pb_error err = PB_ERROR_INIT;
        mf_catalog *cat = NULL;
        PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
        mf_manifest *m = new_manifest("F1", "", 'F');
        for (int i = 0; i < 40; i++) {
            char path[32];
            snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
            add_rel(m, 1, path, 3000, 0, 1, 0, 3000);
        }
        mf_sort(m);
        PBT_CHECK(mf_catalog_apply(cat, m, &err) == 0);
        mf_free(m);
        mf_catalog_close(cat);
        /* a reopen flushes the write-ahead log into table files */
        PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
        mf_catalog_close(cat);
        PBT_CHECK(damage_largest(db, truncate_it) == 0);
        cat = NULL;
        int rc = mf_catalog_open(&cat, db, &err);
        PBT_CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "  damaged catalog: %s\n", err.msg);
        char id[MF_ID_LEN];
        PBT_CHECK(cat && mf_catalog_head(cat, id, &err) == PB_ENOENT);
        mf_catalog_close(cat);
        rm_tree(dir);
    }
}

/* A catalog in a path that cannot be created reports an error, not a crash. */
static void test_catalog_open_fails(void)
{
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = (mf_catalog *)1;
    PBT_CHECK(mf_catalog_open(&cat, "/proc/no/such/catalog", &err) != 0);
    PBT_CHECK(cat == NULL && strstr(err.msg, "/proc/no/such/catalog"));
    mf_catalog_close(NULL);
}

/* An apply larger than the batch limit is written in several batches (bounded memory),
 * still all or nothing for a reader: an apply that fails after a batch was written
 * leaves no head (which the backup rebuilds), never a half-applied one. */
static void test_catalog_batches(void)
{
    char dir[] = "/tmp/mf_test.XXXXXX";
    PBT_CHECK(mkdtemp(dir) != NULL);
    char db[64], path[64], id[MF_ID_LEN];
    snprintf(db, sizeof(db), "%s/catalog", dir);
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = NULL;
    mf_apply_stats st;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (!cat)
        return;
    mf_catalog_set_batch_limit(cat, 256u << 10);
    mf_manifest *m = new_manifest("B1", "", 'F');
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
        add_rel(m, 1, path, 20000, 0, 1, 0, 20000);
    }
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == 0);
    mf_free(m);
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.batches >= 10 && st.chunks_put == 40 * 3);
    PBT_CHECK(mf_catalog_head(cat, id, &err) == 0 && strcmp(id, "B1") == 0);
    mf_head_entry e;
    PBT_CHECK(mf_catalog_lookup(cat, "base/1/1039", &e, &err) == 0 && e.npages == 20000 &&
              e.hashes[19999] == hv(1, "base/1/1039", 19999));
    free(e.hashes);
    /* an incremental whose last file grows without shipping its new pages: corrupt,
     * found after earlier batches were written */
    m = new_manifest("B2", "B1", 'I');
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
        add_rel(m, 2, path, i == 39 ? 20001 : 20000, 0, 1, 0, 20000);
    }
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    mf_free(m);
    PBT_CHECK(mf_catalog_head(cat, id, &err) == PB_ENOENT);
    mf_catalog_close(cat);
    rm_tree(dir);
}

int main(void)
{
    PBT_RUN(test_path_safety);
    PBT_RUN(test_add_find);
    PBT_RUN(test_roundtrip);
    PBT_RUN(test_extension_fields);
    PBT_RUN(test_unsafe_paths_rejected);
    PBT_RUN(test_corrupt_objects);
    PBT_RUN(test_catalog_chain);
    PBT_RUN(test_catalog_open_fails);
    PBT_RUN(test_catalog_damage_rebuilds);
    PBT_RUN(test_catalog_batches);
    return PBT_DONE();
}
