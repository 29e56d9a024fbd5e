/* tests/unit/manifest/manifest_codec_test.c — manifest version 2's frame codec, its
 * per-segment chunks and the writer's record order (docs/MANIFEST.md). */
#include "tests/unit/manifest/manifest_v2_fixtures.h"

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
    PBT_RUN(test_writer_order);
    PBT_RUN(test_codec);
    PBT_RUN(test_segment_chunk);
    return PBT_DONE();
}
