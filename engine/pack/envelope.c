/*
 * engine/pack/envelope.c — the envelope of whole compressed objects (layout in pack.h,
 * docs/FORMAT.md). One codec for every kind, so the bounds that protect a reader from a
 * hostile repository (the raw length against the kind's maximum and against what the
 * payload can expand to; memory that follows the bytes really decompressed) are
 * written once. With engine/pack/pack.c, the only file that includes <zstd.h>.
 *
 * Compression is zstd's one-shot API: objects are held in memory whole (a manifest, a
 * WAL segment of at most 1 GiB), which keeps this file simple.
 */
#include "engine/pack/pack.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int pack_envelope_encode(const void *raw, size_t len, const char *magic, int level,
                         const char *what, pb_buf *out, pb_error *err)
{
    char name[64];
    if (!what) {
        snprintf(name, sizeof(name), "a %zu-byte object", len);
        what = name;
    }
    size_t bound = ZSTD_compressBound(len);
    if (pb_buf_reserve(out, PACK_ENVELOPE_HEADER + bound))
        return pb_fail(err, PB_ENOMEM, "out of memory compressing %s", what);
    uint8_t *h = out->data + out->len;
    size_t n = ZSTD_compress(h + PACK_ENVELOPE_HEADER, bound, raw, len, level);
    if (ZSTD_isError(n))
        return pb_fail(err, PB_EIO, "cannot compress %s: %s", what, ZSTD_getErrorName(n));
    memcpy(h, magic, 8);
    pb_put_u64(h + 8, len);
    pb_put_u64(h + 16, pb_hash64(raw, len));
    pb_put_u64(h + 24, pb_hash64(h + PACK_ENVELOPE_HEADER, n));
    out->len += PACK_ENVELOPE_HEADER + n;
    return 0;
}

/* One piece in, everything zstd gives for it out (the output grows by doubling, so its
 * memory follows the compressed bytes). end: the last piece, the frame is closed. */
static int deflate_piece(ZSTD_CCtx *c, const void *src, size_t n, bool end, pb_buf *out,
                         const char *what, pb_error *err)
{
    ZSTD_inBuffer in = {src, n, 0};
    size_t left = 1;
    while (in.pos < in.size || (end && left)) {
        if (pb_buf_reserve(out, ZSTD_CStreamOutSize()))
            return pb_fail(err, PB_ENOMEM, "out of memory compressing %s", what);
        ZSTD_outBuffer o = {out->data, out->cap, out->len};
        left = ZSTD_compressStream2(c, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(left))
            return pb_fail(err, PB_EIO, "cannot compress %s: %s", what,
                           ZSTD_getErrorName(left));
        out->len = o.pos;
    }
    return 0;
}

static int encode_pieces(ZSTD_CCtx *c, pb_hasher *h, uint8_t *buf, pack_piece_fn read,
                         void *ctx, uint64_t len, const char *what, pb_buf *out, pb_error *err)
{
    uint64_t seen = 0;
    size_t got = 1;
    int rc = 0;
    while (rc == 0 && got) {
        rc = read(ctx, buf, PACK_ENVELOPE_PIECE, &got, err);
        if (rc == 0 && got > len - seen)
            rc = pb_fail(err, PB_EIO, "%s grew while being read (%llu bytes expected)", what,
                         (unsigned long long)len);
        if (rc == 0 && got == 0 && seen != len)
            rc = pb_fail(err, PB_EIO, "%s shrank while being read (%llu of %llu bytes)",
                         what, (unsigned long long)seen, (unsigned long long)len);
        if (rc == 0) {
            pb_hasher_update(h, buf, got);
            seen += got;
            rc = deflate_piece(c, buf, got, got == 0, out, what, err);
        }
    }
    return rc;
}

int pack_envelope_encode_pieces(pack_piece_fn read, void *ctx, uint64_t len, const char *magic,
                                int level, const char *what, pb_buf *out, pb_error *err)
{
    size_t start = out->len;
    ZSTD_CCtx *c = ZSTD_createCCtx();
    pb_hasher *h = pb_hasher_new();
    uint8_t *buf = malloc(PACK_ENVELOPE_PIECE);
    int rc = !c || !h || !buf || pb_buf_reserve(out, PACK_ENVELOPE_HEADER)
                 ? pb_fail(err, PB_ENOMEM, "out of memory compressing %s", what)
                 : 0;
    if (rc == 0 && (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
                    ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(c, len))))
        rc = pb_fail(err, PB_EIO, "cannot set up the compression of %s", what);
    if (rc == 0) {
        out->len += PACK_ENVELOPE_HEADER;
        rc = encode_pieces(c, h, buf, read, ctx, len, what, out, err);
    }
    if (rc == 0) {
        uint8_t *e = out->data + start;
        memcpy(e, magic, 8);
        pb_put_u64(e + 8, len);
        pb_put_u64(e + 16, pb_hasher_digest(h));
        pb_put_u64(e + 24, pb_hash64(e + PACK_ENVELOPE_HEADER,
                                     out->len - start - PACK_ENVELOPE_HEADER));
    } else {
        out->len = start;
    }
    free(buf);
    pb_hasher_free(h);
    ZSTD_freeCCtx(c);
    return rc;
}

/* Streams the zstd frame into a buffer that starts small and doubles, so memory follows
 * the bytes really produced; more than raw_len bytes, a second frame or a truncated one
 * is corruption. */
static int inflate_bounded(const uint8_t *src, size_t srclen, uint64_t raw_len, uint8_t **out,
                           const char *what, pb_error *err)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    size_t limit = (size_t)raw_len + 1; /* one byte more reveals a lying header */
    size_t cap = limit < (1u << 20) ? limit : (1u << 20), have = 0, ret = 1;
    uint8_t *buf = malloc(cap);
    int rc = 0;
    if (!d || !buf) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory decoding %s", what);
        goto out;
    }
    ZSTD_inBuffer in = {src, srclen, 0};
    while (ret != 0) {
        if (have == cap && cap == limit) {
            rc = pb_fail(err, PB_ECORRUPT, "%s: content is longer than its header's %llu bytes",
                         what, (unsigned long long)raw_len);
            goto out;
        }
        if (have == cap) {
            cap = cap > limit / 2 ? limit : cap * 2;
            uint8_t *p = realloc(buf, cap);
            if (!p) {
                rc = pb_fail(err, PB_ENOMEM, "out of memory decoding %s", what);
                goto out;
            }
            buf = p;
        }
        ZSTD_outBuffer o = {buf, cap, have};
        size_t in_before = in.pos;
        ret = ZSTD_decompressStream(d, &o, &in);
        if (ZSTD_isError(ret) || (ret && o.pos == have && in.pos == in_before)) {
            rc = pb_fail(err, PB_ECORRUPT, "%s: cannot decompress: %s", what,
                         ZSTD_isError(ret) ? ZSTD_getErrorName(ret) : "truncated");
            goto out;
        }
        have = o.pos;
    }
    if (in.pos != in.size || have != raw_len)
        rc = pb_fail(err, PB_ECORRUPT, "%s: %zu bytes after decompression, header says %llu%s",
                     what, have, (unsigned long long)raw_len,
                     in.pos != in.size ? " (trailing data)" : "");
out:
    ZSTD_freeDCtx(d);
    if (rc)
        free(buf);
    else
        *out = buf;
    return rc;
}

int pack_envelope_decode(const void *obj, size_t len, const char *magic, uint64_t max_raw,
                         const char *what, void **out, size_t *out_len, pb_error *err)
{
    const uint8_t *h = obj;
    *out = NULL;
    *out_len = 0;
    if (len < PACK_ENVELOPE_HEADER || memcmp(h, magic, 8) != 0)
        return pb_fail(err, PB_ECORRUPT, "%s: bad header (%zu bytes, not a %.8s object)", what,
                       len, magic);
    uint64_t raw_len = pb_get_u64(h + 8);
    size_t plen = len - PACK_ENVELOPE_HEADER;
    if (pb_hash64(h + PACK_ENVELOPE_HEADER, plen) != pb_get_u64(h + 24))
        return pb_fail(err, PB_ECORRUPT, "%s: payload checksum mismatch", what);
    unsigned long long content = ZSTD_getFrameContentSize(h + PACK_ENVELOPE_HEADER, plen);
    if (content != raw_len || raw_len > max_raw || raw_len > SIZE_MAX - 1 ||
        raw_len / PACK_ZSTD_MAX_RATIO > plen)
        return pb_fail(err, PB_ECORRUPT,
                       "%s: impossible raw length %" PRIu64 " (payload %zu bytes, at most %"
                       PRIu64 ")", what, raw_len, plen, max_raw);
    uint8_t *buf = NULL;
    int rc = inflate_bounded(h + PACK_ENVELOPE_HEADER, plen, raw_len, &buf, what, err);
    if (rc)
        return rc;
    if (pb_hash64(buf, raw_len) != pb_get_u64(h + 16)) {
        free(buf);
        return pb_fail(err, PB_ECORRUPT, "%s: content does not match its checksum", what);
    }
    *out = buf;
    *out_len = (size_t)raw_len;
    return 0;
}

int pack_object_decode(const void *obj, size_t len, const char *what, void **out,
                       size_t *out_len, pb_error *err)
{
    return pack_envelope_decode(obj, len, PACK_OBJECT_MAGIC, PACK_OBJECT_MAX_RAW, what, out,
                                out_len, err);
}

int pack_object_encode(const void *raw, size_t len, int level, pb_buf *out, pb_error *err)
{
    return pack_envelope_encode(raw, len, PACK_OBJECT_MAGIC, level, NULL, out, err);
}

/* ---- manifest chunks (docs/MANIFEST.md, version 2): one zstd frame each ---- */

int pack_chunk_compress(const void *data, size_t len, pb_buf *out, pb_error *err)
{
    size_t bound = ZSTD_compressBound(len);
    if (pb_buf_reserve(out, bound))
        return pb_fail(err, PB_ENOMEM, "out of memory compressing a %zu-byte manifest chunk",
                       len);
    size_t n = ZSTD_compress(out->data + out->len, bound, data, len, 3);
    if (ZSTD_isError(n))
        return pb_fail(err, PB_EIO, "cannot compress a manifest chunk: %s",
                       ZSTD_getErrorName(n));
    out->len += n;
    return 0;
}

/* dst holds exactly raw_len bytes (the index's word, bounded by the reader): zstd never
 * writes past it, and any other length is corruption. */
int pack_chunk_decompress(const void *data, size_t len, void *dst, size_t raw_len,
                          pb_error *err)
{
    size_t n = ZSTD_decompress(dst, raw_len, data, len);
    if (ZSTD_isError(n) || n != raw_len)
        return pb_fail(err, PB_ECORRUPT, "compressed chunk of %zu bytes does not decompress "
                       "to %zu bytes: %s", len, raw_len,
                       ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong length");
    return 0;
}
