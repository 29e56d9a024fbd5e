/* tests/unit/manifest/manifest_v2_test.c — manifest format version 2, its stream reader, and the
 * merge of a chain's manifests (docs/MANIFEST.md). */
#include "manifest/manifest.h"
#include "manifest/v2_internal.h"
#include "tests/unit/pbtest.h"

#include <stdlib.h>
#include <string.h>

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

static uint64_t hv(uint32_t b, uint32_t file, uint32_t page)
{
    uint64_t x = ((uint64_t)b << 48) ^ ((uint64_t)file << 24) ^ page;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return (x ^ (x >> 29)) | 1; /* never the zero-page hash by accident */
}

static mf_backup header(const char *id, const char *parent, char type)
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
static mf_file rel(uint32_t b, uint32_t file, uint32_t npages, uint32_t every,
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

static void add(mf_manifest *m, mf_file f)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_add_file(m, &f, &err) == 0);
    mf_file_clear(&f);
}

static mf_manifest *sample(uint32_t b, uint32_t nfiles)
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

static int same_file(const mf_file *a, const mf_file *b)
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

static int same_manifest(const mf_manifest *a, const mf_manifest *b)
{
    if (mf_count(a) != mf_count(b) || memcmp(mf_header_c(a), mf_header_c(b), sizeof(mf_backup)))
        return 0;
    for (size_t i = 0; i < mf_count(a); i++)
        if (!same_file(mf_at(a, i), mf_at(b, i)))
            return 0;
    return 1;
}

static int parse_code(const pb_buf *b, mf_manifest **keep)
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

static void test_roundtrip_v2(void)
{
    mf_manifest *m = sample(0, 20000), *p = NULL;
    pb_buf b = {0}, b2 = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize(m, &b, &err) == 0);
    PBT_CHECK(pb_get_u32(b.data + 8) == MF_VERSION_2);
    PBT_CHECK(parse_code(&b, &p) == 0);
    PBT_CHECK(p && same_manifest(m, p));
    PBT_CHECK(p && mf_find(p, "base/5/100006")->runs[2].frame_page == 2);
    PBT_CHECK(p && mf_find(p, "base/5/100006")->inode == 1006);
    PBT_CHECK(p && mf_serialize(p, &b2, &err) == 0 && b2.len == b.len &&
              memcmp(b.data, b2.data, b.len) == 0); /* deterministic */
    mf_free(p);
    mf_free(m);
    pb_buf_free(&b);
    pb_buf_free(&b2);
}

/* Annotations are header tag 36, written only when present: an unannotated header is
 * byte for byte what it was, and an annotated one reads back the same. */
static void test_annotations(void)
{
    mf_manifest *m = sample(0, 10), *p = NULL;
    pb_buf plain = {0}, ann = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize(m, &plain, &err) == 0);
    snprintf(mf_header(m)->annotations, MF_ANNOTATIONS_LEN, "reason=pre-upgrade\nticket=7\n");
    PBT_CHECK(mf_serialize(m, &ann, &err) == 0);
    PBT_CHECK(ann.len == plain.len + 2 + strlen("reason=pre-upgrade\nticket=7\n"));
    PBT_CHECK(parse_code(&ann, &p) == 0 && p && same_manifest(m, p));
    PBT_CHECK(p && !strcmp(mf_header(p)->annotations, "reason=pre-upgrade\nticket=7\n"));
    mf_free(p);
    p = NULL;
    PBT_CHECK(parse_code(&plain, &p) == 0 && p && mf_header(p)->annotations[0] == '\0');
    mf_free(p);
    mf_free(m);
    pb_buf_free(&plain);
    pb_buf_free(&ann);
}

/* The data directory's size is header tag 37, written only when known. */
static void test_db_bytes(void)
{
    mf_manifest *m = sample(0, 10), *p = NULL;
    pb_buf plain = {0}, sized = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize(m, &plain, &err) == 0);
    mf_header(m)->db_bytes = 1234567890123ull;
    PBT_CHECK(mf_serialize(m, &sized, &err) == 0);
    PBT_CHECK(sized.len > plain.len);
    PBT_CHECK(parse_code(&sized, &p) == 0 && p && mf_header(p)->db_bytes == 1234567890123ull);
    mf_free(p);
    p = NULL;
    PBT_CHECK(parse_code(&plain, &p) == 0 && p && mf_header(p)->db_bytes == 0);
    mf_free(p);
    mf_free(m);
    pb_buf_free(&plain);
    pb_buf_free(&sized);
}

static void test_v1_still_read(void)
{
    mf_manifest *m = sample(0, 50), *p = NULL;
    pb_buf b = {0};
    pb_error err = PB_ERROR_INIT;
    /* version 1 cannot express a run inside a shared frame: its writer refuses */
    PBT_CHECK(mf_serialize_v1(m, &b, &err) == PB_EINVAL && strstr(err.msg, "shared frame"));
    for (size_t i = 0; i < mf_count(m); i++) {
        mf_file *f = (mf_file *)mf_at(m, i);
        for (uint32_t k = 0; k < f->nruns; k++)
            f->runs[k].frame_page = 0;
        f->inode = 0; /* version 1 does not carry it */
    }
    /* nor pg_control's stop point and the read reason: an old parent lacks them */
    mf_backup *h = mf_header(m);
    h->ctl_recorded = false;
    h->ctl_checksum_version = h->ctl_timeline = 0;
    h->ctl_redo_lsn = h->ctl_checkpoint_lsn = 0;
    h->ctl_history_known = false;
    h->ctl_history_hash = 0;
    memset(h->read_why, 0, sizeof(h->read_why));
    b.len = 0;
    PBT_CHECK(mf_serialize_v1(m, &b, &err) == 0 && pb_get_u32(b.data + 8) == 1);
    PBT_CHECK(parse_code(&b, &p) == 0 && p && same_manifest(m, p));
    mf_free(p);
    mf_free(m);
    pb_buf_free(&b);
}

/* All-zero pages and unshipped pages cost next to nothing. */
static void test_compact(void)
{
    mf_backup h = header("20261201-000000F", "", 'F');
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    mf_new(&m, &h, &err);
    add(m, rel(0, 1, 131072, 1, 0));           /* a 1 GiB segment of all-zero pages */
    add(m, rel(1, 2, 131072, 131072, 131072)); /* one changed page of 131072 */
    pb_buf b = {0};
    PBT_CHECK(mf_serialize(m, &b, &err) == 0);
    PBT_CHECK(b.len < 400); /* version 1: over 1 MiB of hashes */
    mf_manifest *p = NULL;
    PBT_CHECK(parse_code(&b, &p) == 0 && p && same_manifest(m, p));
    mf_free(p);
    mf_free(m);
    pb_buf_free(&b);
}

/* ---- hostile objects ---- */

static void test_every_flip_and_truncation(void)
{
    mf_manifest *m = sample(1, 3);
    pb_buf b = {0}, t = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_serialize(m, &b, &err) == 0);
    mf_free(m);
    int flips = 1, truncs = 1;
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.data[i] ^= (uint8_t)(1u << bit);
            if (parse_code(&b, NULL) != PB_ECORRUPT && parse_code(&b, NULL) != PB_EUNSUPPORTED)
                flips = 0;
            b.data[i] ^= (uint8_t)(1u << bit);
        }
    }
    for (size_t n = 0; n < b.len; n++) {
        t.len = 0;
        pb_buf_append(&t, b.data, n);
        if (parse_code(&t, NULL) != PB_ECORRUPT)
            truncs = 0;
    }
    PBT_CHECK(flips && truncs);
    pb_buf_append(&b, "x", 1); /* a stray byte after the last chunk */
    PBT_CHECK(parse_code(&b, NULL) == PB_ECORRUPT);
    pb_buf_free(&b);
    pb_buf_free(&t);
}

/* One chunk of hand-made records with valid checksums: only the decoder's checks stand
 * between the bytes and an allocation. */
static int parse_crafted(const uint8_t *rec, size_t len, uint32_t nfiles, const char *first,
                         const char *last, uint64_t claimed_files)
{
    mf_backup h = header("20261201-000000F", "", 'F');
    mf_chunk_ref c = {0, (uint32_t)len, 0, nfiles, pb_hash64(rec, len), (char *)first,
                      (char *)last};
    pb_buf b = {0};
    pb_error err = PB_ERROR_INIT;
    if (mf_v2_put_head(&b, &h, &c, 1, claimed_files, &err) || pb_buf_append(&b, rec, len))
        abort();
    mf_manifest *p = NULL;
    int rc = mf_parse(b.data, b.len, "crafted", &p, &err);
    if (rc && getenv("PBT_VERBOSE"))
        fprintf(stderr, "  crafted: %s\n", err.msg);
    mf_free(p);
    pb_buf_free(&b);
    return rc;
}

static void test_crafted_records(void)
{
    /* shared prefix, suffix "a", body: kind 1 (rel), mode, size, mtime, inode, npages,
     * nruns, run(first, count, pack, off, clen, rlen, frame), hashes */
    const uint8_t good[] = {0, 1, 'a', 16, 1, 0, 0x80, 0x40, 0, 0, 1, 1, 0, 1, 0, 0, 40, 0, 0,
                            3};
    PBT_CHECK(parse_crafted(good, sizeof(good), 1, "a", "a", 1) == 0);
    struct { size_t at; uint8_t v; } evil[] = {
        {10, 0x7f},             /* npages 127 for 8192 bytes */
        {11, 9},                /* 9 runs in 7 bytes */
        {13, 2},                /* run of 2 pages in a 1-page file */
        {19, 5},                /* zero-page token of 2 pages for 1 shipped */
        {19, 2},                /* 1 literal hash with no bytes left */
        {0, 1},                 /* shared prefix longer than the previous path */
        {1, 0},                 /* empty path suffix */
        {3, 40},                /* record longer than the chunk */
        {4, 9},                 /* unknown kind */
        {2, '/'},               /* unsafe path "/" */
    };
    for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
        uint8_t c[sizeof(good)];
        memcpy(c, good, sizeof(good));
        c[evil[i].at] = evil[i].v;
        int rc = parse_crafted(c, sizeof(c), 1, evil[i].at == 2 ? "/" : "a",
                               evil[i].at == 2 ? "/" : "a", 1);
        PBT_CHECK(rc == PB_ECORRUPT);
        if (rc != PB_ECORRUPT)
            fprintf(stderr, "crafted #%zu: rc %d\n", i, rc);
    }
    /* the index's promises: file count, first and last path */
    PBT_CHECK(parse_crafted(good, sizeof(good), 1, "a", "a", 2) == PB_ECORRUPT);
    PBT_CHECK(parse_crafted(good, sizeof(good), 2, "a", "a", 2) == PB_ECORRUPT);
    PBT_CHECK(parse_crafted(good, sizeof(good), 1, "a", "b", 1) == PB_ECORRUPT);
    PBT_CHECK(parse_crafted(good, sizeof(good), 1, "0", "a", 1) == PB_ECORRUPT);
    /* a field appended by a newer writer (tag 1, 2 bytes) is skipped: additive */
    uint8_t ext[sizeof(good) + 4];
    memcpy(ext, good, sizeof(good));
    memcpy(ext + sizeof(good), (uint8_t[]){1, 2, 'x', 'y'}, 4);
    ext[3] = 20;
    PBT_CHECK(parse_crafted(ext, sizeof(ext), 1, "a", "a", 1) == 0);
    ext[sizeof(good)] = 0; /* tag 0 is not a field */
    PBT_CHECK(parse_crafted(ext, sizeof(ext), 1, "a", "a", 1) == PB_ECORRUPT);
}

/* ---- streaming ---- */

typedef struct count_src {
    const pb_buf *b;
    uint64_t reads, bytes;
} count_src;

static int count_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    count_src *c = ctx;
    if (off > c->b->len || len > c->b->len - off)
        return pb_fail(err, PB_ECORRUPT, "read past the end");
    memcpy(dst, c->b->data + off, len);
    c->reads++;
    c->bytes += len;
    return 0;
}

static int sink(void *ctx, const void *data, size_t len, pb_error *err)
{
    (void)err;
    return pb_buf_append(ctx, data, len);
}

/* An object of nfiles REL files written through mf_writer, never a whole manifest. */
static void write_big(uint32_t b, uint32_t nfiles, uint32_t every, pb_buf *obj)
{
    mf_backup h = header(b ? "20261201-000100I" : "20261201-000000F", b ? "20261201-000000F" : "",
                         b ? 'I' : 'F');
    mf_writer *w = NULL;
    pb_buf body = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_writer_new(&w, &h, NULL, sink, &body, &err) == 0);
    for (uint32_t i = 0; i < nfiles; i++) {
        mf_file f = rel(b, i, 3 + i % 40, every, 1000);
        PBT_CHECK(mf_writer_add(w, &f, &err) == 0);
        mf_file_clear(&f);
    }
    PBT_CHECK(mf_writer_finish(w, obj, &err) == 0);
    pb_buf_append(obj, body.data, body.len);
    mf_writer_free(w);
    pb_buf_free(&body);
}

static uint64_t stream_all(const pb_buf *obj, uint64_t *files, count_src *cs)
{
    *cs = (count_src){obj, 0, 0};
    mf_source src = {count_read, NULL, cs, obj->len, NULL};
    mf_stream *s = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_stream_open(&s, &src, "big", &err) == 0);
    if (!s)
        return 0;
    mf_file f;
    int rc;
    *files = 0;
    while ((rc = mf_stream_next(s, &f, &err)) == 1) {
        (*files)++;
        mf_file_clear(&f);
    }
    PBT_CHECK(rc == 0);
    uint64_t peak = mf_stream_peak(s);
    mf_stream_close(s);
    return peak;
}

/* The bytes a stream holds stay under a constant whatever the number of files: one
 * chunk (about MF_V2_CHUNK_TARGET) plus the index plus one record. */
static void test_stream_bounded(void)
{
    const uint32_t sizes[] = {2000, 200000};
    uint64_t peak[2] = {0};
    for (int i = 0; i < 2; i++) {
        pb_buf obj = {0};
        write_big(0, sizes[i], 1, &obj);
        uint64_t files = 0;
        count_src cs;
        peak[i] = stream_all(&obj, &files, &cs);
        PBT_CHECK(files == sizes[i]);
        PBT_CHECK(peak[i] > 0 && peak[i] < 2 * MF_V2_CHUNK_TARGET + (256u << 10));
        PBT_CHECK(cs.bytes == obj.len); /* every byte read once */
        if (i == 1)
            PBT_CHECK(obj.len > 20 * peak[i]); /* the whole object would not fit the bound */
        printf("  %u files: object %zu bytes, %llu reads, peak held %llu bytes\n", sizes[i],
               obj.len, (unsigned long long)cs.reads, (unsigned long long)peak[i]);
        pb_buf_free(&obj);
    }
}

static void test_header_only(void)
{
    pb_buf obj = {0};
    write_big(1, 50000, 7, &obj);
    count_src cs = {&obj, 0, 0};
    mf_source src = {count_read, NULL, &cs, obj.len, NULL};
    mf_backup h;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_read_header(&src, "big", &h, &err) == 0);
    PBT_CHECK(strcmp(h.id, "20261201-000100I") == 0 && h.type == 'I' && h.stop_time == -5 &&
              h.seconds == 12.625 && strcmp(h.stop_wal, "000000030000001200000035") == 0);
    PBT_CHECK(cs.reads == 2 && cs.bytes < 300);
    obj.data[30] ^= 1; /* inside the header */
    PBT_CHECK(mf_read_header(&src, "big", &h, &err) == PB_ECORRUPT);
    pb_buf_free(&obj);
}

/* A source that owns its object: the stream frees it on close. */
typedef struct owned_src {
    count_src cs; /* first: count_read takes it as its context */
    pb_buf obj;
} owned_src;

static void owned_close(void *ctx)
{
    owned_src *o = ctx;
    pb_buf_free(&o->obj);
    free(o);
}

static mf_stream *stream_of(const char *id, const char *parent, char type, const char *paths)
{
    mf_backup h = header(id, parent, type);
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    mf_new(&m, &h, &err);
    for (const char *p = paths; *p; p++) {
        mf_file d = {0};
        char name[2] = {*p, 0};
        d.path = xstrdup(name);
        d.kind = MF_DIR;
        add(m, d);
    }
    mf_sort(m);
    mf_stream *s = NULL;
    if (type != 'I') { /* the full streams from memory (as a version 1 object would) */
        PBT_CHECK(mf_stream_from_manifest(&s, m, &err) == 0);
        return s;
    }
    owned_src *o = calloc(1, sizeof(*o));
    PBT_CHECK(o && mf_serialize(m, &o->obj, &err) == 0);
    mf_free(m);
    o->cs.b = &o->obj;
    mf_source src = {count_read, owned_close, o, o->obj.len, NULL};
    PBT_CHECK(mf_stream_open(&s, &src, id, &err) == 0); /* s owns o now */
    return s;
}

static void test_merge(void)
{
    mf_stream *s[3] = {stream_of("F1", "", 'F', "ABC"), stream_of("I1", "F1", 'I', "BD"),
                       stream_of("I2", "I1", 'I', "ADE")};
    mf_merge *m = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_merge_open(&m, s, 3, &err) == 0);
    const char *want[] = {"A101", "B110", "C100", "D011", "E001"};
    const mf_file *const *files;
    size_t k = 0;
    int rc;
    while ((rc = mf_merge_next(m, &files, &err)) == 1) {
        char got[5] = {0};
        for (int i = 0; i < 3; i++)
            if (files[i])
                got[0] = files[i]->path[0];
        for (int i = 0; i < 3; i++)
            got[1 + i] = files[i] ? '1' : '0';
        PBT_CHECK(k < 5 && strcmp(got, want[k]) == 0);
        k++;
    }
    PBT_CHECK(rc == 0 && k == 5);
    mf_merge_close(m);
}

/* A toy codec (byte runs as count, byte pairs) standing in for engine/'s zstd. */
static int rle_compress(const void *data, size_t len, pb_buf *out, pb_error *err)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;
        while (j < len && j - i < 255 && p[j] == p[i])
            j++;
        uint8_t pair[2] = {(uint8_t)(j - i), p[i]};
        if (pb_buf_append(out, pair, 2))
            return pb_fail(err, PB_ENOMEM, "rle");
        i = j;
    }
    return 0;
}

static int rle_decompress(const void *data, size_t len, void *dst, size_t raw_len,
                          pb_error *err)
{
    const uint8_t *p = data;
    size_t at = 0;
    for (size_t i = 0; i + 1 < len; i += 2) {
        if (p[i] > raw_len - at)
            return pb_fail(err, PB_ECORRUPT, "rle: too long");
        memset((uint8_t *)dst + at, p[i + 1], p[i]);
        at += p[i];
    }
    return at == raw_len && len % 2 == 0 ? 0 : pb_fail(err, PB_ECORRUPT, "rle: short");
}

static void test_codec(void)
{
    const mf_codec rle = {rle_compress, rle_decompress, 128}; /* 255 bytes from 2 */
    mf_backup h = header("20261201-000000F", "", 'F');
    mf_manifest *m = NULL, *p = NULL;
    pb_error err = PB_ERROR_INIT;
    mf_new(&m, &h, &err);
    for (uint32_t i = 0; i < 30000; i++)
        add(m, rel(0, i, 40, 1, 99));
    for (size_t i = 0; i < mf_count(m); i++) { /* hashes of 0: long runs of zero bytes */
        mf_file *f = (mf_file *)mf_at(m, i);
        for (uint64_t k = 0; f->kind == MF_REL && k < mf_shipped_pages(f); k++)
            f->page_hashes[k] = 0;
    }
    pb_buf raw = {0}, packed = {0};
    PBT_CHECK(mf_serialize(m, &raw, &err) == 0);
    PBT_CHECK(mf_serialize_codec(m, &rle, &packed, &err) == 0);
    PBT_CHECK(packed.len < raw.len);
    PBT_CHECK(mf_parse_codec(packed.data, packed.len, &rle, "packed", &p, &err) == 0 && p &&
              same_manifest(m, p));
    mf_free(p);
    p = NULL;
    /* without the codec: refused as unsupported, never misread */
    PBT_CHECK(mf_parse(packed.data, packed.len, "packed", &p, &err) == PB_EUNSUPPORTED);
    /* a compressed chunk that does not decompress to the index's length: corruption */
    pb_buf bad = {0};
    PBT_CHECK(mf_serialize_codec(m, &rle, &bad, &err) == 0);
    bad.data[bad.len - 1] ^= 0x01; /* inside the last chunk: its checksum catches it */
    PBT_CHECK(mf_parse_codec(bad.data, bad.len, &rle, "bad", &p, &err) == PB_ECORRUPT);
    pb_buf_free(&bad);
    /* a chunk claiming more than the codec can expand it to: refused before allocating */
    mf_backup hh = header("20261201-000000F", "", 'F');
    const uint8_t two[2] = {255, 0};
    mf_chunk_ref c = {0, 2, 100000, 1, pb_hash64(two, 2), (char *)"a", (char *)"a"};
    bad.len = 0;
    PBT_CHECK(mf_v2_put_head(&bad, &hh, &c, 1, 1, &err) == 0 && pb_buf_append(&bad, two, 2) == 0);
    PBT_CHECK(mf_parse_codec(bad.data, bad.len, &rle, "greedy", &p, &err) == PB_ECORRUPT &&
              strstr(err.msg, "claims") != NULL);
    pb_buf_free(&bad);
    pb_buf_free(&raw);
    pb_buf_free(&packed);
    mf_free(m);
}

/* A codec that never shrinks (like page hashes under zstd): chunks stored raw. */
static int copy_compress(const void *data, size_t len, pb_buf *out, pb_error *err)
{
    if (pb_buf_reserve(out, len + len / 256 + 64) || pb_buf_append(out, data, len))
        return pb_fail(err, PB_ENOMEM, "copy");
    return 0;
}

static int copy_decompress(const void *data, size_t len, void *dst, size_t raw_len,
                           pb_error *err)
{
    if (len != raw_len)
        return pb_fail(err, PB_ECORRUPT, "copy: %zu bytes for %zu", len, raw_len);
    memcpy(dst, data, len);
    return 0;
}

/* A 1 GiB segment's record (1 MiB of hashes) after almost a chunk of small ones: the
 * open chunk closes before it, and the writer holds one chunk and one compressed copy of
 * about the record's size, not the double of each (2.1 + 2.1 MiB). */
static void test_segment_chunk(void)
{
    const mf_codec copy = {copy_compress, copy_decompress, 1};
    mf_backup h = header("20261201-000000F", "", 'F');
    mf_writer *w = NULL;
    pb_buf body = {0}, obj = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_writer_new(&w, &h, &copy, sink, &body, &err) == 0);
    uint32_t n = 0;
    for (; n < 5000; n++) { /* about 1.8 MiB: one chunk closed, the next one most of one */
        mf_file f = rel(0, n, 40, 1, 99);
        PBT_CHECK(mf_writer_add(w, &f, &err) == 0);
        mf_file_clear(&f);
    }
    const uint32_t seg_pages = 131072; /* 1 GiB of 8 KiB pages */
    mf_file seg = rel(0, 50000, seg_pages, 1, seg_pages);
    uint64_t rec = (uint64_t)seg_pages * 8;
    PBT_CHECK(mf_writer_add(w, &seg, &err) == 0);
    mf_file_clear(&seg);
    for (uint32_t i = 0; i < 10; i++) {
        mf_file f = rel(0, 50001 + i, 40, 1, 99);
        PBT_CHECK(mf_writer_add(w, &f, &err) == 0);
        mf_file_clear(&f);
    }
    PBT_CHECK(mf_writer_finish(w, &obj, &err) == 0);
    uint64_t peak = mf_writer_peak(w);
    printf("  %u small records and one of %llu bytes: writer peak %llu bytes\n", n,
           (unsigned long long)rec, (unsigned long long)peak);
    PBT_CHECK(peak < 2 * rec + (96u << 10));
    mf_writer_free(w);
    pb_buf_append(&obj, body.data, body.len);
    mf_manifest *m = NULL;
    PBT_CHECK(mf_parse_codec(obj.data, obj.len, &copy, "segment", &m, &err) == 0 && m &&
              mf_count(m) == n + 11);
    const mf_file *big = NULL;
    for (size_t i = 0; m && i < mf_count(m); i++)
        if (!strcmp(mf_at(m, i)->path, "base/5/150000"))
            big = mf_at(m, i);
    PBT_CHECK(big && big->npages == seg_pages && big->page_hashes[7] == hv(0, 50000, 7));
    mf_free(m);
    pb_buf_free(&obj);
    pb_buf_free(&body);
}

static void test_writer_order(void)
{
    mf_backup h = header("20261201-000000F", "", 'F');
    mf_writer *w = NULL;
    pb_buf body = {0}, head = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_writer_new(&w, &h, NULL, sink, &body, &err) == 0);
    mf_file a = rel(0, 2, 3, 1, 99), b = rel(0, 1, 3, 1, 99);
    PBT_CHECK(mf_writer_add(w, &a, &err) == 0);
    PBT_CHECK(mf_writer_add(w, &a, &err) == PB_EINVAL); /* duplicate */
    PBT_CHECK(mf_writer_add(w, &b, &err) == PB_ESTATE); /* failed writer stays failed */
    PBT_CHECK(mf_writer_finish(w, &head, &err) == PB_ESTATE && head.len == 0);
    mf_writer_free(w);
    PBT_CHECK(mf_writer_new(&w, &h, NULL, sink, &body, &err) == 0);
    PBT_CHECK(mf_writer_add(w, &a, &err) == 0);
    PBT_CHECK(mf_writer_add(w, &b, &err) == PB_EINVAL); /* out of order */
    mf_writer_free(w);
    h.type = 'X';
    PBT_CHECK(mf_writer_new(&w, &h, NULL, sink, &body, &err) == PB_EINVAL);
    mf_file_clear(&a);
    mf_file_clear(&b);
    pb_buf_free(&body);
    pb_buf_free(&head);
}

int main(void)
{
    PBT_RUN(test_roundtrip_v2);
    PBT_RUN(test_v1_still_read);
    PBT_RUN(test_annotations);
    PBT_RUN(test_db_bytes);
    PBT_RUN(test_compact);
    PBT_RUN(test_every_flip_and_truncation);
    PBT_RUN(test_crafted_records);
    PBT_RUN(test_stream_bounded);
    PBT_RUN(test_header_only);
    PBT_RUN(test_merge);
    PBT_RUN(test_writer_order);
    PBT_RUN(test_codec);
    PBT_RUN(test_segment_chunk);
    return PBT_DONE();
}
