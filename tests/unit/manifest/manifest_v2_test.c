/* tests/unit/manifest/manifest_v2_test.c — manifest format version 2, its stream reader, and the
 * merge of a chain's manifests (docs/MANIFEST.md). */
#include "tests/unit/manifest/manifest_v2_fixtures.h"

#include <stdlib.h>
#include <string.h>

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
    return PBT_DONE();
}
